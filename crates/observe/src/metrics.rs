//! The board's counters in the Prometheus text exposition format (version 0.0.4), and a
//! small HTTP server that serves them at `GET /metrics`.
//!
//! The text is written here rather than through a metrics crate: the counters already live
//! in each worker's [`Summary`] (the executor counts them without atomics), and the
//! exposition is a pure function of the latest snapshots. A registry of live metric handles
//! (`prometheus-client`, `prometheus`) would mean either updating shared atomics per packet
//! or rebuilding a registry per scrape, and those crates write the OpenMetrics dialect. The
//! format's rules this writer follows: one `# HELP` and one `# TYPE` line per family before
//! its samples, names `[a-zA-Z_:][a-zA-Z0-9_:]*`, counters ending in `_total`, label values
//! in double quotes with `\`, `"` and newline escaped, one family's samples together.
//!
//! Every sample carries `worker="N"` (the worker's index on the board; `0` with one
//! worker). Families, per worker:
//!
//! | family | labels | |
//! | --- | --- | --- |
//! | `fusebox_chain_{input,created,output,dropped}_packets_total` | | chain totals |
//! | `fusebox_chain_held_packets` (gauge) | | held now (ARP queues) |
//! | `fusebox_chain_drops_total` | `reason` | chain drops by reason (with `filter-excluded`) |
//! | `fusebox_nf_{input,output,created,dropped}_packets_total` | `nf` | per NF |
//! | `fusebox_nf_held_packets` (gauge) | `nf` | |
//! | `fusebox_element_input_packets_total` | `nf`, `element`, `class` | per element |
//! | `fusebox_element_output_packets_total` | + `port` | per output port |
//! | `fusebox_element_drops_total` | + `reason` | drops by reason |
//! | `fusebox_element_stat` (gauge) | + `stat` | element-specific counters (some go down, e.g. active mappings) |
//! | `fusebox_element_held_packets` (gauge) | `nf`, `element`, `class` | |
//! | `fusebox_exit_{packets,bytes}_total` | `exit` | per exit |
//! | `fusebox_port_{rx,tx}_{packets,bytes}_total`, `fusebox_port_rx_kernel_drops_total`, `fusebox_port_tx_full_total` | `port` | per device port (live runs) |
//!
//! and, without labels, `fusebox_run_stopped` (1 once the run has stopped: the numbers are
//! its final summary) and `fusebox_workers` (workers that have published).

use crate::board::Board;
use chain::summary::Summary;
use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

/// The `Content-Type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value with `\`, `"` and newline escaped.
fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Writes one family: its `# HELP` and `# TYPE` lines, then a sample per
/// (labels, value) that `samples` yields. Labels are (name, value) pairs; values are escaped
/// here.
fn family<'a, L>(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, u64)>,
) where
    L: IntoIterator<Item = (&'a str, String)>,
{
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, v) in samples {
        out.push_str(name);
        let mut first = true;
        for (k, val) in labels {
            out.push(if first { '{' } else { ',' });
            first = false;
            let _ = write!(out, "{k}=\"{}\"", escape(&val));
        }
        if !first {
            out.push('}');
        }
        let _ = writeln!(out, " {v}");
    }
}

/// The labels of worker `w`.
fn worker(w: usize) -> Vec<(&'static str, String)> {
    vec![("worker", w.to_string())]
}

/// `workers` (worker index, its summary) in the text exposition format; `stopped` says the
/// numbers are final.
pub fn render(workers: &[(usize, Summary)], stopped: bool) -> String {
    let mut o = String::new();
    family(
        &mut o,
        "fusebox_run_stopped",
        "gauge",
        "1 once the run has stopped (the numbers are its final summary), else 0.",
        [(Vec::<(&str, String)>::new(), u64::from(stopped))],
    );
    family(
        &mut o,
        "fusebox_workers",
        "gauge",
        "Workers whose counters are below.",
        [(Vec::<(&str, String)>::new(), workers.len() as u64)],
    );
    type Pick = fn(&chain::summary::Totals) -> u64;
    let totals: [(&str, &str, Pick); 4] = [
        ("input", "Packets into the chain.", |t| t.input),
        (
            "created",
            "Packets the chain made (copies, fragments, ARP queries, ICMP errors, reflected replies).",
            |t| t.created,
        ),
        ("output", "Packets out of the chain's exits.", |t| t.output),
        ("dropped", "Packets the chain dropped.", |t| t.dropped),
    ];
    for (what, help, pick) in totals {
        family(
            &mut o,
            &format!("fusebox_chain_{what}_packets_total"),
            "counter",
            help,
            workers.iter().map(|(w, s)| (worker(*w), pick(&s.totals))),
        );
    }
    family(
        &mut o,
        "fusebox_chain_held_packets",
        "gauge",
        "Packets the chain holds now (ARP queues).",
        workers.iter().map(|(w, s)| (worker(*w), s.totals.held)),
    );
    family(
        &mut o,
        "fusebox_chain_drops_total",
        "counter",
        "Packets the chain dropped, by reason.",
        workers.iter().flat_map(|(w, s)| {
            s.totals.drops.iter().map(move |(r, n)| {
                let mut l = worker(*w);
                l.push(("reason", r.clone()));
                (l, *n)
            })
        }),
    );
    type NfPick = fn(&chain::summary::NfSummary) -> u64;
    let nf_counts: [(&str, &str, &str, NfPick); 5] = [
        (
            "input_packets_total",
            "counter",
            "Packets into the NF.",
            |n| n.input,
        ),
        (
            "output_packets_total",
            "counter",
            "Packets out of the NF.",
            |n| n.output,
        ),
        (
            "created_packets_total",
            "counter",
            "Packets the NF's elements made.",
            |n| n.created,
        ),
        (
            "dropped_packets_total",
            "counter",
            "Packets the NF dropped.",
            |n| n.dropped,
        ),
        ("held_packets", "gauge", "Packets the NF holds now.", |n| {
            n.held
        }),
    ];
    for (what, kind, help, pick) in nf_counts {
        family(
            &mut o,
            &format!("fusebox_nf_{what}"),
            kind,
            help,
            workers.iter().flat_map(|(w, s)| {
                s.nfs.iter().map(move |n| {
                    let mut l = worker(*w);
                    l.push(("nf", n.name.clone()));
                    (l, pick(n))
                })
            }),
        );
    }
    // Every element of every NF of every worker, with its labels.
    let elements = || {
        workers.iter().flat_map(|(w, s)| {
            s.nfs.iter().flat_map(move |n| {
                n.elements.iter().map(move |e| {
                    let mut l = worker(*w);
                    l.push(("nf", n.name.clone()));
                    l.push(("element", e.name.clone()));
                    l.push(("class", e.class.clone()));
                    (l, e)
                })
            })
        })
    };
    family(
        &mut o,
        "fusebox_element_input_packets_total",
        "counter",
        "Packets pushed into the element.",
        elements().map(|(l, e)| (l, e.input)),
    );
    family(
        &mut o,
        "fusebox_element_output_packets_total",
        "counter",
        "Packets out of each of the element's output ports.",
        elements().flat_map(|(l, e)| {
            e.output.iter().enumerate().map(move |(port, n)| {
                let mut l = l.clone();
                l.push(("port", port.to_string()));
                (l, *n)
            })
        }),
    );
    family(
        &mut o,
        "fusebox_element_drops_total",
        "counter",
        "Packets the element dropped, by reason.",
        elements().flat_map(|(l, e)| {
            e.drops.iter().map(move |(r, n)| {
                let mut l = l.clone();
                l.push(("reason", r.clone()));
                (l, *n)
            })
        }),
    );
    family(
        &mut o,
        "fusebox_element_stat",
        "gauge",
        "Element-specific counters (a Counter's count, a rewriter's mappings); some can go down.",
        elements().flat_map(|(l, e)| {
            e.stats.iter().map(move |(k, n)| {
                let mut l = l.clone();
                l.push(("stat", k.clone()));
                (l, *n)
            })
        }),
    );
    family(
        &mut o,
        "fusebox_element_held_packets",
        "gauge",
        "Packets the element holds now.",
        elements().map(|(l, e)| (l, e.held)),
    );
    type ExitPick = fn(&chain::summary::ExitSummary) -> u64;
    let exit_counts: [(&str, &str, ExitPick); 2] = [
        ("packets", "Packets out of the exit.", |x| x.packets),
        ("bytes", "Bytes out of the exit.", |x| x.bytes),
    ];
    for (what, help, pick) in exit_counts {
        family(
            &mut o,
            &format!("fusebox_exit_{what}_total"),
            "counter",
            help,
            workers.iter().flat_map(|(w, s)| {
                s.exits.iter().map(move |x| {
                    let mut l = worker(*w);
                    l.push(("exit", x.name.clone()));
                    (l, pick(x))
                })
            }),
        );
    }
    type PortPick = fn(&chain::summary::PortSummary) -> u64;
    let port_counts: [(&str, &str, PortPick); 6] = [
        ("rx_packets", "Frames received on the device.", |p| {
            p.rx_packets
        }),
        ("rx_bytes", "Bytes received on the device.", |p| p.rx_bytes),
        (
            "rx_kernel_drops",
            "Frames the kernel dropped before FuseBox read them (receive ring overruns).",
            |p| p.rx_kernel_drops,
        ),
        ("tx_packets", "Frames sent on the device.", |p| p.tx_packets),
        ("tx_bytes", "Bytes sent on the device.", |p| p.tx_bytes),
        (
            "tx_full",
            "Frames dropped because the transmit ring was full (tx-full).",
            |p| p.tx_full,
        ),
    ];
    if workers.iter().any(|(_, s)| !s.ports.is_empty()) {
        for (what, help, pick) in port_counts {
            family(
                &mut o,
                &format!("fusebox_port_{what}_total"),
                "counter",
                help,
                workers.iter().flat_map(|(w, s)| {
                    s.ports.iter().map(move |p| {
                        let mut l = worker(*w);
                        l.push(("port", p.name.clone()));
                        (l, pick(p))
                    })
                }),
            );
        }
    }
    o
}

/// The HTTP server of `--metrics`: `GET /metrics` answers [`render`] of the board's latest
/// snapshots; any other path is 404, another method on `/metrics` 405. It runs on its own
/// thread, blocking, one request at a time; dropping the server stops and joins the thread.
pub struct Server {
    http: Arc<tiny_http::Server>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens on `addr` (`HOST:PORT`; port 0 picks a free one, see [`Server::addr`]) and
    /// serves `board`.
    pub fn start(addr: &str, board: Arc<Board>) -> io::Result<Self> {
        let http = tiny_http::Server::http(addr)
            .map_err(|e| io::Error::other(format!("cannot listen on {addr}: {e}")))?;
        let bound = http
            .server_addr()
            .to_ip()
            .ok_or_else(|| io::Error::other(format!("{addr}: not an IP address")))?;
        let http = Arc::new(http);
        let serving = http.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || serve(&serving, &board))?;
        Ok(Self {
            http,
            addr: bound,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.http.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers requests until the server is unblocked.
fn serve(http: &tiny_http::Server, board: &Board) {
    for req in http.incoming_requests() {
        let path = req.url().split('?').next().unwrap_or_default();
        let get = matches!(
            req.method(),
            tiny_http::Method::Get | tiny_http::Method::Head
        );
        let response = if path != "/metrics" {
            tiny_http::Response::from_string("not found; try /metrics\n").with_status_code(404)
        } else if !get {
            tiny_http::Response::from_string("only GET\n").with_status_code(405)
        } else {
            // Copy the snapshots out of the lock, then render.
            let stopped = board.stopped();
            let text = render(&board.snapshot(), stopped);
            let mut r = tiny_http::Response::from_string(text);
            if let Ok(h) = tiny_http::Header::from_bytes("Content-Type", CONTENT_TYPE) {
                r = r.with_header(h);
            }
            r
        };
        // A client that went away is not our error.
        let _ = req.respond(response);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrape::parse;
    use chain::summary::{ElementSummary, ExitSummary, NfSummary, PortSummary, Totals};
    use std::collections::BTreeMap;

    fn summary(k: u64) -> Summary {
        let drops: BTreeMap<String, u64> = [("bad-ip-header".to_string(), k)].into();
        Summary {
            nfs: vec![NfSummary {
                name: "fw".into(),
                input: 10 * k,
                output: 9 * k,
                created: 0,
                dropped: k,
                held: 0,
                balanced: true,
                drops: drops.clone(),
                elements: vec![ElementSummary {
                    // A name that needs escaping.
                    name: "odd\"name\\".into(),
                    class: "CheckIPHeader".into(),
                    input: 10 * k,
                    output: vec![9 * k, 0],
                    drops: drops.clone(),
                    stats: [("count".to_string(), 7)].into(),
                    held: 0,
                }],
            }],
            exits: vec![ExitSummary {
                name: "fw.eth1".into(),
                packets: 9 * k,
                bytes: 900 * k,
            }],
            ports: vec![PortSummary {
                name: "fw.eth1".into(),
                tx_packets: 8 * k,
                tx_full: k,
                ..PortSummary::default()
            }],
            totals: Totals {
                input: 10 * k,
                created: 0,
                output: 9 * k,
                dropped: k,
                held: 0,
                drops,
                balanced: true,
            },
        }
    }

    #[test]
    fn every_counter_of_every_worker_is_labelled_and_parses() {
        let text = render(&[(0, summary(1)), (1, summary(2))], false);
        let s = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        for f in &s.families {
            assert!(f.name.starts_with("fusebox_"), "{}", f.name);
            assert!(f.help.is_some(), "{}", f.name);
            assert_eq!(
                f.kind == "counter",
                f.name.ends_with("_total"),
                "{}",
                f.name
            );
        }
        assert_eq!(s.value("fusebox_run_stopped", &[]), Some(0.0));
        assert_eq!(s.value("fusebox_workers", &[]), Some(2.0));
        assert_eq!(
            s.value("fusebox_chain_input_packets_total", &[("worker", "1")]),
            Some(20.0)
        );
        assert_eq!(
            s.value(
                "fusebox_chain_drops_total",
                &[("worker", "0"), ("reason", "bad-ip-header")]
            ),
            Some(1.0)
        );
        assert_eq!(
            s.value(
                "fusebox_nf_dropped_packets_total",
                &[("worker", "1"), ("nf", "fw")]
            ),
            Some(2.0)
        );
        let el = [
            ("worker", "1"),
            ("nf", "fw"),
            ("element", "odd\"name\\"),
            ("class", "CheckIPHeader"),
        ];
        assert_eq!(
            s.value("fusebox_element_input_packets_total", &el),
            Some(20.0)
        );
        let mut port = el.to_vec();
        port.push(("port", "0"));
        assert_eq!(
            s.value("fusebox_element_output_packets_total", &port),
            Some(18.0)
        );
        let mut reason = el.to_vec();
        reason.push(("reason", "bad-ip-header"));
        assert_eq!(s.value("fusebox_element_drops_total", &reason), Some(2.0));
        let mut stat = el.to_vec();
        stat.push(("stat", "count"));
        assert_eq!(s.value("fusebox_element_stat", &stat), Some(7.0));
        assert_eq!(
            s.value(
                "fusebox_exit_bytes_total",
                &[("worker", "0"), ("exit", "fw.eth1")]
            ),
            Some(900.0)
        );
        let port = [("worker", "1"), ("port", "fw.eth1")];
        assert_eq!(s.value("fusebox_port_tx_packets_total", &port), Some(16.0));
        assert_eq!(s.value("fusebox_port_tx_full_total", &port), Some(2.0));
        assert_eq!(s.value("fusebox_port_rx_packets_total", &port), Some(0.0));
        assert!(render(&[], true).contains("\nfusebox_run_stopped 1\n"));
        let mut offline = summary(1);
        offline.ports.clear();
        assert!(!render(&[(0, offline)], false).contains("fusebox_port_"));
    }

    #[test]
    fn serves_metrics_and_nothing_else() {
        let board = Board::new(1);
        let server = Server::start("127.0.0.1:0", board.clone()).unwrap();
        let r = crate::scrape::get(server.addr(), "/metrics").unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.content_type.as_deref(), Some(CONTENT_TYPE));
        assert_eq!(
            parse(&r.body).unwrap().value("fusebox_workers", &[]),
            Some(0.0)
        );
        board.publish(0, summary(3));
        board.mark_stopped();
        let r = crate::scrape::get(server.addr(), "/metrics?x=1").unwrap();
        let s = parse(&r.body).unwrap();
        assert_eq!(s.value("fusebox_run_stopped", &[]), Some(1.0));
        assert_eq!(
            s.value("fusebox_chain_output_packets_total", &[("worker", "0")]),
            Some(27.0)
        );
        assert_eq!(crate::scrape::get(server.addr(), "/").unwrap().status, 404);
        // A large exposition (the server sends it in chunks) arrives whole.
        for w in 0..64 {
            board.publish(w, summary(w as u64));
        }
        let r = crate::scrape::get(server.addr(), "/metrics").unwrap();
        assert!(r.body.len() > 64 * 1024, "{}", r.body.len());
        let s = parse(&r.body).unwrap();
        assert_eq!(s.value("fusebox_workers", &[]), Some(64.0));
        assert_eq!(
            s.value(
                "fusebox_exit_packets_total",
                &[("worker", "63"), ("exit", "fw.eth1")]
            ),
            Some(9.0 * 63.0)
        );
        drop(server);
    }

    #[test]
    fn a_taken_address_is_an_error() {
        let a = Server::start("127.0.0.1:0", Board::new(1)).unwrap();
        let e = Server::start(&a.addr().to_string(), Board::new(1))
            .err()
            .expect("second bind");
        assert!(e.to_string().contains("cannot listen"), "{e}");
    }
}
