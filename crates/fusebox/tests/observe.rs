//! Watching and stopping a run: `--metrics` scraped during a replay and after a SIGINT,
//! the progress line, and clean stops (SIGINT, SIGTERM) of a replay and of a streamed input
//! that never ends (a FIFO), each exiting 0 within a second with a balanced summary.

mod common;
use common::*;
use observe::scrape::{self, Scrape};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// A `fusebox` process of this test: its stderr lines arrive on a channel, its stdout is
/// collected; dropping it kills the process (only this one, by its handle).
struct Running {
    child: Child,
    stderr: Receiver<String>,
    seen: Vec<String>,
    stdout: Option<std::thread::JoinHandle<String>>,
}

impl Running {
    fn start(dir: &Path, args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fusebox"))
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        Running {
            child,
            stderr: rx,
            seen: Vec::new(),
            stdout: Some(stdout),
        }
    }

    /// The first stderr line (from now on) that `pred` accepts, waiting up to `timeout`.
    fn wait_line(&mut self, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if pred(&l) {
                        return l;
                    }
                }
                Err(_) => panic!(
                    "no such line within {timeout:?}; stderr:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Sends `signal` (`INT`, `TERM`) to the process.
    fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .args(["-s", signal, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -s {signal} failed");
    }

    /// Waits up to `timeout` for the process to exit.
    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    /// Everything on stdout (after the process has exited) and the rest of stderr.
    fn outputs(&mut self) -> (String, String) {
        let out = self.stdout.take().unwrap().join().unwrap();
        self.seen.extend(self.stderr.try_iter());
        (out, self.seen.join("\n"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The SNF Fig. 5 chain and a trace with drops of several reasons.
fn fig5_trace(d: &Path, packets: &str) -> PathBuf {
    gen_trace(
        d,
        "trace.pcap",
        &[
            "--packets",
            packets,
            "--flows",
            "60",
            "--mix",
            "tcp=1,udp=2,icmp=1",
            "--src",
            "192.168.0.0/24",
            "--dst",
            "10.0.2.0/24",
            "--dport",
            "1234,53",
            "--seed",
            "7",
        ],
    );
    root().join("examples/fig5/chain.toml")
}

fn scrape_now(addr: SocketAddr) -> (Scrape, String) {
    let r = scrape::get(addr, "/metrics").unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.content_type.as_deref(),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let s = scrape::parse(&r.body).unwrap_or_else(|e| panic!("{e}:\n{}", r.body));
    (s, r.body)
}

fn v(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> u64 {
    let x = s
        .value(name, labels)
        .unwrap_or_else(|| panic!("no {name} {labels:?}"));
    assert!(x >= 0.0 && x.fract() == 0.0, "{name} {labels:?} = {x}");
    x as u64
}

const W: (&str, &str) = ("worker", "0");

/// The checks every scrape of a one-worker run passes: names, help, types, the worker
/// label, and the chain's accounting within the snapshot.
fn sane(s: &Scrape) {
    for f in &s.families {
        assert!(f.name.starts_with("fusebox_"), "{}", f.name);
        assert!(
            f.help.as_deref().is_some_and(|h| !h.is_empty()),
            "{}",
            f.name
        );
        assert_eq!(
            f.kind == "counter",
            f.name.ends_with("_total"),
            "{}",
            f.name
        );
        assert!(matches!(f.kind.as_str(), "counter" | "gauge"), "{}", f.name);
        for x in &f.samples {
            let global = ["fusebox_run_stopped", "fusebox_workers"].contains(&f.name.as_str());
            assert_eq!(
                x.labels.get("worker").map(String::as_str),
                (!global).then_some("0"),
                "{} {:?}",
                f.name,
                x.labels
            );
            assert!(x.value >= 0.0 && x.value.fract() == 0.0, "{x:?}");
        }
    }
    assert_eq!(v(s, "fusebox_workers", &[]), 1);
    let t = |w: &str| v(s, &format!("fusebox_chain_{w}"), &[W]);
    assert_eq!(
        t("input_packets_total") + t("created_packets_total"),
        t("output_packets_total") + t("dropped_packets_total") + t("held_packets"),
        "a snapshot balances"
    );
    for nf in ["napt", "fw", "lb"] {
        v(s, "fusebox_nf_input_packets_total", &[W, ("nf", nf)]);
    }
}

/// Every counter of the JSON summary `j` has its sample in `s` with the same value, and `s`
/// has no other series.
fn equals_summary(s: &Scrape, j: &Value) {
    let n = |x: &Value| x.as_u64().unwrap();
    let mut expected = 2; // run_stopped and workers
    let t = &j["totals"];
    for (what, key) in [
        ("input_packets_total", "input"),
        ("created_packets_total", "created"),
        ("output_packets_total", "output"),
        ("dropped_packets_total", "dropped"),
        ("held_packets", "held"),
    ] {
        assert_eq!(
            v(s, &format!("fusebox_chain_{what}"), &[W]),
            n(&t[key]),
            "{what}"
        );
        expected += 1;
    }
    for (r, c) in t["drops"].as_object().unwrap() {
        assert_eq!(v(s, "fusebox_chain_drops_total", &[W, ("reason", r)]), n(c));
        expected += 1;
    }
    for x in j["exits"].as_array().unwrap() {
        let e = x["name"].as_str().unwrap();
        assert_eq!(
            v(s, "fusebox_exit_packets_total", &[W, ("exit", e)]),
            n(&x["packets"])
        );
        assert_eq!(
            v(s, "fusebox_exit_bytes_total", &[W, ("exit", e)]),
            n(&x["bytes"])
        );
        expected += 2;
    }
    // Device ports (live runs; the JSON leaves the list out when it is empty).
    for p in j["ports"].as_array().into_iter().flatten() {
        let port = p["name"].as_str().unwrap();
        for k in [
            "rx_packets",
            "rx_bytes",
            "rx_kernel_drops",
            "tx_packets",
            "tx_bytes",
            "tx_full",
        ] {
            let got = v(s, &format!("fusebox_port_{k}_total"), &[W, ("port", port)]);
            assert_eq!(got, n(&p[k]), "{port} {k}");
            expected += 1;
        }
    }
    for nf in j["nfs"].as_array().unwrap() {
        let name = nf["name"].as_str().unwrap();
        for (what, key) in [
            ("input_packets_total", "input"),
            ("output_packets_total", "output"),
            ("created_packets_total", "created"),
            ("dropped_packets_total", "dropped"),
            ("held_packets", "held"),
        ] {
            let got = v(s, &format!("fusebox_nf_{what}"), &[W, ("nf", name)]);
            assert_eq!(got, n(&nf[key]), "{name} {what}");
            expected += 1;
        }
        for e in nf["elements"].as_array().unwrap() {
            let el = [
                W,
                ("nf", name),
                ("element", e["name"].as_str().unwrap()),
                ("class", e["class"].as_str().unwrap()),
            ];
            let with = |k: &'static str, val: &str| {
                let mut l: Vec<(&str, String)> =
                    el.iter().map(|(a, b)| (*a, b.to_string())).collect();
                l.push((k, val.to_string()));
                l
            };
            let at = |name: &str, l: &[(&str, String)]| {
                let l: Vec<(&str, &str)> = l.iter().map(|(a, b)| (*a, b.as_str())).collect();
                v(s, name, &l)
            };
            assert_eq!(
                v(s, "fusebox_element_input_packets_total", &el),
                n(&e["input"])
            );
            assert_eq!(v(s, "fusebox_element_held_packets", &el), n(&e["held"]));
            expected += 2;
            for (port, c) in e["output"].as_array().unwrap().iter().enumerate() {
                let l = with("port", &port.to_string());
                assert_eq!(at("fusebox_element_output_packets_total", &l), n(c));
                expected += 1;
            }
            for (r, c) in e["drops"].as_object().unwrap() {
                assert_eq!(at("fusebox_element_drops_total", &with("reason", r)), n(c));
                expected += 1;
            }
            for (k, c) in e["stats"].as_object().unwrap() {
                assert_eq!(at("fusebox_element_stat", &with("stat", k)), n(c));
                expected += 1;
            }
        }
    }
    let all: usize = s.families.iter().map(|f| f.samples.len()).sum();
    assert_eq!(all, expected, "series beyond the summary's counters");
}

/// Counter series never go down from one scrape to the next.
fn monotone(before: &Scrape, after: &Scrape) {
    for f in before.families.iter().filter(|f| f.kind == "counter") {
        for x in &f.samples {
            let l: Vec<(&str, &str)> = x
                .labels
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            let later = after.value(&x.name, &l).unwrap();
            assert!(later >= x.value, "{} {:?} went down", x.name, x.labels);
        }
    }
}

/// The progress line: rates over the last second, then totals and the time.
fn progress_line_ok(l: &str) {
    let body = l.strip_prefix("progress: ").unwrap();
    let parts: Vec<&str> = body.split(" | ").collect();
    assert_eq!(parts.len(), 3, "{l}");
    let rates: Vec<&str> = parts[0].split(' ').collect();
    assert_eq!(rates.len(), 9, "{l}");
    for (i, word) in ["in", "out", "drop"].iter().enumerate() {
        assert_eq!(rates[3 * i], *word, "{l}");
        assert!(rates[3 * i + 1].parse::<f64>().is_ok(), "{l}");
        assert!(["pps", "kpps", "Mpps"].contains(&rates[3 * i + 2]), "{l}");
    }
    let totals: Vec<&str> = parts[1].split(", ").collect();
    for (t, what) in totals.iter().zip(["in", "out", "dropped", "held"]) {
        let (num, w) = t.split_once(' ').unwrap();
        assert!(num.parse::<u64>().is_ok() && w == what, "{l}");
    }
    assert!(parts[2].ends_with(" s"), "{l}");
}

#[test]
fn metrics_during_a_replay_and_after_sigint_equal_the_final_summary() {
    let d = scratch("observe-metrics");
    let chain = fig5_trace(&d, "3000");
    for mode in ["naive", "fastpath"] {
        let mut run = Running::start(
            &d,
            &[
                "run",
                chain.to_str().unwrap(),
                "--input",
                "napt.eth0=trace.pcap",
                "--mode",
                mode,
                "--replay",
                "100000000",
                "--json",
                "--metrics",
                "127.0.0.1:0",
                "--metrics-linger",
                "2",
                "--progress",
                "lines",
            ],
        );
        let line = run.wait_line(Duration::from_secs(20), |l| {
            l.starts_with("metrics: serving")
        });
        let addr: SocketAddr = line
            .strip_prefix("metrics: serving http://")
            .and_then(|r| r.strip_suffix("/metrics"))
            .unwrap()
            .parse()
            .unwrap();
        // During the run: packets flow, every scrape is sane and counters only grow.
        let progress = run.wait_line(Duration::from_secs(20), |l| l.starts_with("progress: "));
        progress_line_ok(&progress);
        let (first, _) = scrape_now(addr);
        sane(&first);
        assert_eq!(v(&first, "fusebox_run_stopped", &[]), 0);
        std::thread::sleep(Duration::from_millis(300));
        let (second, _) = scrape_now(addr);
        sane(&second);
        monotone(&first, &second);
        let input = |s: &Scrape| v(s, "fusebox_chain_input_packets_total", &[W]);
        assert!(input(&second) > input(&first), "{mode}: the counters move");
        assert!(
            v(
                &second,
                "fusebox_chain_drops_total",
                &[W, ("reason", "filter-deny")]
            ) > 0,
            "{mode}: drops by reason"
        );
        assert_eq!(scrape::get(addr, "/").unwrap().status, 404);
        // A second progress line comes a second after the first, with a rate.
        progress_line_ok(&run.wait_line(Duration::from_secs(5), |l| l.starts_with("progress: ")));

        // SIGINT: within a second the metrics serve the final summary.
        run.signal("INT");
        let t0 = Instant::now();
        let last = loop {
            let (s, _) = scrape_now(addr);
            if v(&s, "fusebox_run_stopped", &[]) == 1 {
                break s;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(1),
                "{mode}: not stopped within 1 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "{mode}: stopped late"
        );
        sane(&last);
        monotone(&second, &last);
        let status = run
            .wait_exit(Duration::from_secs(10))
            .expect("exits after the linger");
        let (out, err) = run.outputs();
        assert!(status.success(), "{mode}: {status:?}\n{err}");
        let j: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(j["replay"]["stopped"], true, "{j}");
        let n = j["replay"]["packets"].as_u64().unwrap();
        assert!(n > 0 && n < 3000 * 100_000_000, "{n}");
        let summary = &j["summary"];
        assert_eq!(summary["totals"]["balanced"], true, "{summary}");
        assert_eq!(summary["totals"]["input"].as_u64(), Some(n));
        equals_summary(&last, summary);
        assert!(err.contains("stopped by a signal"), "{err}");
    }
}

#[test]
fn sigterm_stops_a_replay_within_a_second() {
    let d = scratch("observe-sigterm");
    let chain = fig5_trace(&d, "2000");
    let mut run = Running::start(
        &d,
        &[
            "run",
            chain.to_str().unwrap(),
            "--input",
            "napt.eth0=trace.pcap",
            "--mode",
            "synth",
            "--replay",
            "100000000",
            "--json",
            "--progress",
            "lines",
        ],
    );
    // The first progress line comes after the first batch: the handlers are in place.
    run.wait_line(Duration::from_secs(20), |l| l.starts_with("progress: "));
    run.signal("TERM");
    let status = run
        .wait_exit(Duration::from_secs(1))
        .expect("exits within a second of SIGTERM");
    let (out, err) = run.outputs();
    assert!(status.success(), "{status:?}\n{err}");
    let j: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(j["replay"]["stopped"], true);
    let t = &j["summary"]["totals"];
    assert_eq!(t["balanced"], true, "{t}");
    let sum = |k: &str| t[k].as_u64().unwrap();
    assert_eq!(
        sum("input") + sum("created"),
        sum("output") + sum("dropped") + sum("held")
    );
    let drops: u64 = t["drops"]
        .as_object()
        .unwrap()
        .values()
        .map(|x| x.as_u64().unwrap())
        .sum();
    assert_eq!(drops, sum("dropped"), "every drop has its reason");
}

/// Writes a pcap stream to `fifo` for ever (the records of `trace`, again and again, a
/// trace's span later each time) until the reader goes away.
fn feed(fifo: PathBuf, trace: PathBuf) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let bytes = std::fs::read(&trace).unwrap();
        let (header, body) = bytes.split_at(24);
        let mut records = Vec::new();
        let mut at = 0;
        while at + 16 <= body.len() {
            let len = u32::from_le_bytes(body[at + 8..at + 12].try_into().unwrap()) as usize;
            records.push(body[at..at + 16 + len].to_vec());
            at += 16 + len;
        }
        let mut out = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        if out.write_all(header).is_err() {
            return 0;
        }
        let mut written = 0u64;
        for round in 0u32..100_000 {
            let mut chunk = Vec::new();
            for r in &records {
                let mut r = r.clone();
                let sec = u32::from_le_bytes(r[0..4].try_into().unwrap()) + 10 * round;
                r[0..4].copy_from_slice(&sec.to_le_bytes());
                chunk.extend_from_slice(&r);
            }
            if out.write_all(&chunk).is_err() {
                break;
            }
            written += records.len() as u64;
        }
        written
    })
}

#[test]
fn sigint_stops_an_endless_streamed_input_and_flushes_the_outputs() {
    let d = scratch("observe-fifo");
    let chain = fig5_trace(&d, "1000");
    let ok = Command::new("mkfifo")
        .arg(d.join("in.fifo"))
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo");
    let mut run = Running::start(
        &d,
        &[
            "run",
            chain.to_str().unwrap(),
            "--input",
            "napt.eth0=in.fifo",
            "--json",
            "--progress",
            "lines",
        ],
    );
    let feeder = feed(d.join("in.fifo"), d.join("trace.pcap"));
    run.wait_line(Duration::from_secs(20), |l| l.starts_with("progress: "));
    std::thread::sleep(Duration::from_millis(200));
    run.signal("INT");
    let status = run
        .wait_exit(Duration::from_secs(1))
        .expect("exits within a second of SIGINT");
    let (out, err) = run.outputs();
    assert!(status.success(), "{status:?}\n{err}");
    assert!(err.contains("run: stopped by a signal"), "{err}");
    let j: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(j["totals"]["balanced"], true, "{j}");
    let input = j["totals"]["input"].as_u64().unwrap();
    assert!(input > 0);
    // Every packet counted out of an exit is in its file: the outputs were flushed.
    for x in j["exits"].as_array().unwrap() {
        let file = d.join(format!("{}.pcap", x["name"].as_str().unwrap()));
        let n = packets(&file).len() as u64;
        assert_eq!(n, x["packets"].as_u64().unwrap(), "{}", file.display());
    }
    // The feeder stops when the reader is gone; it wrote more than was read.
    let written = feeder.join().unwrap();
    assert!(written >= input, "{written} < {input}");
}

#[test]
fn a_bad_metrics_address_is_one_clear_error() {
    let d = scratch("observe-bad-addr");
    let chain = fig5_trace(&d, "10");
    let c = chain.to_str().unwrap();
    let o = fusebox(
        &d,
        &[
            "run",
            c,
            "--input",
            "napt.eth0=trace.pcap",
            "--metrics",
            "nonsense",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("fusebox: error: --metrics nonsense: cannot listen on nonsense"),
        "{err}"
    );
    // An address in use: the second run cannot listen there.
    let first =
        observe::metrics::Server::start("127.0.0.1:0", observe::board::Board::new(1)).unwrap();
    let taken = first.addr().to_string();
    let o = fusebox(
        &d,
        &[
            "run",
            c,
            "--input",
            "napt.eth0=trace.pcap",
            "--metrics",
            &taken,
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("--metrics {taken}: cannot listen")),
        "{err}"
    );
    let o = fusebox(
        &d,
        &[
            "run",
            c,
            "--input",
            "napt.eth0=trace.pcap",
            "--metrics-linger",
            "1",
        ],
    );
    assert!(!o.status.success(), "--metrics-linger needs --metrics");
}

#[test]
fn two_workers_are_labelled_apart_and_stop_cleanly() {
    let d = scratch("observe-workers");
    let chain = fig5_trace(&d, "2000");
    let mut run = Running::start(
        &d,
        &[
            "run",
            chain.to_str().unwrap(),
            "--input",
            "napt.eth0=trace.pcap",
            "--cores",
            "2",
            "--replay",
            "100000000",
            "--json",
            "--metrics",
            "127.0.0.1:0",
            "--metrics-linger",
            "2",
            "--progress",
            "lines",
            "--progress-workers",
        ],
    );
    let line = run.wait_line(Duration::from_secs(20), |l| {
        l.starts_with("metrics: serving")
    });
    let addr: SocketAddr = line
        .strip_prefix("metrics: serving http://")
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap()
        .parse()
        .unwrap();
    // Once both workers have published, the line shows each one's rates.
    let l = run.wait_line(Duration::from_secs(20), |l| {
        l.starts_with("progress: ") && l.contains(" | w1 in ")
    });
    assert!(l.contains(" | w0 in "), "{l}");
    let per_worker =
        |s: &Scrape, w: &str, what: &str| v(s, &format!("fusebox_chain_{what}"), &[("worker", w)]);
    let (s, _) = scrape_now(addr);
    assert_eq!(v(&s, "fusebox_workers", &[]), 2);
    for w in ["0", "1"] {
        let c = |what: &str| per_worker(&s, w, what);
        assert!(c("input_packets_total") > 0, "worker {w} runs");
        assert_eq!(
            c("input_packets_total") + c("created_packets_total"),
            c("output_packets_total") + c("dropped_packets_total") + c("held_packets"),
            "worker {w}'s snapshot balances"
        );
    }
    run.signal("INT");
    let t0 = Instant::now();
    let last = loop {
        let (s, _) = scrape_now(addr);
        if v(&s, "fusebox_run_stopped", &[]) == 1 {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "not stopped within 1 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let status = run.wait_exit(Duration::from_secs(10)).expect("exits");
    let (out, err) = run.outputs();
    assert!(status.success(), "{status:?}\n{err}");
    let j: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(j["replay"]["stopped"], true, "{}", j["replay"]);
    let t = &j["summary"]["totals"];
    assert_eq!(t["balanced"], true, "{t}");
    // The last scrape is each worker's final counters; they add up to the summary.
    let workers = j["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    for (key, what) in [
        ("input", "input_packets_total"),
        ("created", "created_packets_total"),
        ("output", "output_packets_total"),
        ("dropped", "dropped_packets_total"),
        ("held", "held_packets"),
    ] {
        let mut sum = 0;
        for x in workers {
            let w = x["worker"].as_u64().unwrap().to_string();
            let got = per_worker(&last, &w, what);
            assert_eq!(got, x[key].as_u64().unwrap(), "worker {w} {key}");
            sum += got;
        }
        assert_eq!(sum, t[key].as_u64().unwrap(), "{key} over the workers");
    }
}
