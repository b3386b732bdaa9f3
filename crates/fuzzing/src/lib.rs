//! The checks FuseBox's fuzz targets run: one function per target, taking the fuzzer's
//! bytes. Each returns normally when the input is handled as the project promises (bad input
//! refused with an error, never a panic; modes agreeing) and panics otherwise. The targets in
//! `fuzz/` are one-line wrappers around these functions, and `tests/fuzz_regressions.rs`
//! replays every input fuzzing found (`fuzz/regressions/TARGET/`) through the same
//! functions in the normal test suite.
//!
//! | target | what is fed | what must hold |
//! |---|---|---|
//! | [`pcap`] | a capture file | the reader returns records or one error, then stops |
//! | [`wire`] | a frame | every header view, `Repr::parse` and walker: no panic |
//! | [`click`] | a Click configuration | parse, expand and build the NF: `Ok` or `Err` |
//! | [`chain_file`] | a chain file | parse and build the executor: `Ok` or `Err` |
//! | [`filter`] | a filter text and a packet | the element's model and its `push` agree |
//! | [`classbench`] | a ClassBench filter set | the compiled classifier equals a linear scan |
//! | [`snort`] | Snort rules and a packet | rules parse or refuse; the IDS runs the packet |
//! | [`chains`] | packets for an example chain or a golden configuration | naive, synth and fastpath agree |
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use chain::{ChainFile, Endpoint, Executor, ExitSink, PreparedProgram, RunOptions};
use elements::model::{self, Model, Outcome};
use elements::{BuildCtx, Context, Element, Names, Verdict};
use packet::{Packet, Ports, Timestamp};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use synth::verify::{compare, run_installed, RunResult};

/// The repository's `examples/` folder (chain files and Click configurations the targets
/// resolve relative names against).
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// A scratch file or folder that removes itself (unique per process and call).
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Scratch {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        // Memory-backed when there is such a folder: a file per input on disk is slow.
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        Scratch(dir.join(format!("fusebox-fuzz-{what}-{}-{n}", std::process::id())))
    }

    fn with(what: &str, data: &[u8]) -> Scratch {
        let s = Scratch::new(what);
        std::fs::write(&s.0, data)
            .unwrap_or_else(|e| panic!("harness: cannot write {}: {e}", s.0.display()));
        s
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.0.is_dir() {
            let _ = std::fs::remove_dir_all(&self.0);
        } else {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// Whether a configuration or chain text may name files the checks must not open
/// (devices that never end, files created by `ALERTS`).
fn names_special_files(text: &str) -> bool {
    ["/dev", "/proc", "/sys", "ALERTS"]
        .iter()
        .any(|w| text.contains(w))
}

/// Splits `data` at its first zero byte: (text before it, lossily decoded; bytes after it).
fn text_and_bytes(data: &[u8]) -> (String, &[u8]) {
    let at = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let text = String::from_utf8_lossy(&data[..at]).into_owned();
    (text, data.get(at + 1..).unwrap_or(&[]))
}

// ---------------------------------------------------------------------------------------
// 1. The capture reader.

/// The pcap/pcapng reader (`ports::pcap::PcapReader`, the reader of every `--input` and
/// `FromDump`) on `data` as a file: opening it succeeds or fails with an error; reading then
/// returns records until the end or one error, after which it returns `None`; the records
/// read are counted; `read_all` agrees with the streaming reader.
pub fn pcap(data: &[u8]) {
    use ports::pcap::{read_all, PcapReader};
    let file = Scratch::with("pcap", data);
    let Ok(mut r) = PcapReader::open(&file.0) else {
        return;
    };
    let (mut records, mut error) = (Vec::new(), None);
    // A record takes at least one byte of the file: more would be a loop.
    for _ in 0..=data.len() {
        match r.next_record() {
            Some(Ok(rec)) => records.push(rec),
            Some(Err(e)) => {
                let _ = (e.to_string(), e.kind(), e.path());
                error = Some(e.to_string());
                break;
            }
            None => break,
        }
    }
    assert!(
        records.len() <= data.len(),
        "more records than bytes in the file"
    );
    assert!(r.next_record().is_none(), "a record after the end or error");
    assert_eq!(r.records_read(), records.len() as u64, "records_read");
    let _ = (r.linktype(), r.precision());
    match read_all(&file.0) {
        Ok((all, err)) => {
            assert_eq!(all.len(), records.len(), "read_all: record count");
            for (a, b) in all.iter().zip(&records) {
                assert_eq!(
                    (a.timestamp, a.orig_len, &a.data),
                    (b.timestamp, b.orig_len, &b.data),
                    "read_all: records differ"
                );
            }
            assert_eq!(err.map(|e| e.to_string()), error, "read_all: error differs");
        }
        Err(e) => panic!("read_all refused a file open accepted: {e}"),
    }
}

// ---------------------------------------------------------------------------------------
// 2. Wire parsing.

/// Every header view of the `wire` crate on `data` at every layer offset the frame walker
/// finds, every `Repr::parse`, the walkers, and the flow-key parsers of `packet`: none may
/// panic, and a view `new_checked` accepted answers every getter.
pub fn wire(data: &[u8]) {
    let mut offsets = vec![0usize, 14];
    if let Ok(l) = wire::parse::layers(data) {
        offsets.extend(l.l3_offset);
        offsets.extend(l.l4_offset);
    }
    for &off in &offsets {
        let Some(d) = data.get(off..) else { continue };
        wire::every_view(d);
        for parse in [packet::Ipv4Flow::parse, packet::Ipv4Flow::parse_trimmed] {
            if let Some(f) = parse(d) {
                let _ = (f.bytes(), f.version(), f.header_len(), f.protocol());
                let _ = (f.src(), f.dst(), f.total_len(), f.first_fragment());
                let _ = (f.transport_len(), f.transport(), f.tcp_flags());
                let _ = f.tcp_has_payload();
                for rule in [Ports::Raw, Ports::TcpUdp, Ports::Transport] {
                    let _ = (f.ports(rule), f.key(rule).rss_hash());
                }
            }
        }
        let _ = packet::Ipv4Flow::table_key(d);
        if let Some(k) = packet::FlowKey::from_ethernet(d) {
            assert_eq!(
                packet::symmetric_rss(&k),
                packet::symmetric_rss(&k.reversed()),
                "symmetric RSS differs between directions"
            );
        }
        let _ = packet::FlowKey::from_ip(d);
    }
    let p = Packet::from_bytes(data);
    let _ = (p.ether(), p.ipv4(), p.tcp(), p.udp(), p.icmpv4());
}

// ---------------------------------------------------------------------------------------
// 3. Click configurations.

/// The Click parser and expander on `data` (lossily UTF-8), then, when it parses, the NF
/// built from it (every element's configuration parsed by its class): `Ok` or `Err`,
/// never a panic. Relative file names resolve in `examples/isp`.
pub fn click(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let defines = [("FUZZ".to_string(), "1".to_string())];
    let Ok(cfg) = click::parse_str(&text, "fuzz.click", &defines) else {
        return;
    };
    for c in &cfg.connections {
        assert!(
            c.from < cfg.elements.len() && c.to < cfg.elements.len(),
            "a connection names an element that is not there"
        );
    }
    if names_special_files(&text) {
        return;
    }
    let _ = chain::Nf::build("nf", &cfg, &examples().join("isp"), true);
}

// ---------------------------------------------------------------------------------------
// 4. Chain files.

/// The chain-file parser on `data` (lossily UTF-8) as `examples/isp/chain.toml` (so its
/// NFs can name the examples' Click files), then, when it parses, the executor built from
/// it: `Ok` or `Err`, never a panic.
pub fn chain_file(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let path = examples().join("isp/chain.toml");
    let Ok(chain) = ChainFile::parse(&text, &path) else {
        return;
    };
    if names_special_files(&text) {
        return;
    }
    for nf in &chain.nfs {
        // Only the examples' own Click files: a fuzzed name may be any file.
        let ok = nf.click.extension().is_some_and(|e| e == "click")
            && std::fs::metadata(&nf.click).is_ok_and(|m| m.is_file());
        if !ok {
            return;
        }
    }
    let _ = Executor::new(&chain, &RunOptions::default(), |_, _| Ok(ExitSink::Count));
}

// ---------------------------------------------------------------------------------------
// 5. The filter languages.

/// What `push` did, as a model outcome.
fn pushed(e: &mut dyn Element, p: Packet) -> Option<Outcome> {
    let mut cx = Context::default();
    match e.push(0, p, &mut cx) {
        Verdict::Out(o, _) => Some(Outcome::Out(o)),
        Verdict::Drop(_, r) => Some(Outcome::Drop(r)),
        Verdict::Done => None,
    }
}

/// The outcome of the first case of `m` holding on `p`.
fn modelled(m: &Model, p: &Packet) -> Outcome {
    m.cases
        .iter()
        .find(|c| model::matches(&c.filter, p, m.ip_at))
        .expect("the cases of a model cover every packet")
        .outcome
        .clone()
}

/// The element's model (what synthesis compiles it to) sends `p` where `push` does.
fn check_model(e: &mut dyn Element, p: Packet, what: &str) {
    let Some(m) = e.model() else {
        let _ = pushed(e, p);
        return;
    };
    let want = modelled(&m, &p);
    let bytes = p.data().to_vec();
    let got = pushed(e, p);
    if want != Outcome::Runtime && want != Outcome::Copies(1) {
        assert_eq!(
            got,
            Some(want),
            "{what}: model and push differ on {bytes:02x?}"
        );
    }
}

/// The filter languages: `data[0]` picks the language (`IPFilter`, `IPClassifier`,
/// `PcapFilter`, `Classifier`), `data[1]` the outputs connected and the annotations; the
/// text up to the first zero byte is the configuration, the rest is a packet. The text is
/// compiled (refused with an error, or built), the element runs the packet, its model must
/// send it where `push` does, and `IPFilter`'s first-match index must agree with a plain scan.
pub fn filter(data: &[u8]) {
    let (Some(&lang), Some(&shape)) = (data.first(), data.get(1)) else {
        return;
    };
    let (text, frame) = text_and_bytes(&data[2..]);
    if names_special_files(&text) {
        return;
    }
    let class = ["IPFilter", "IPClassifier", "PcapFilter", "Classifier"][usize::from(lang % 4)];
    let names = Names::new();
    let base = examples().join("isp");
    let bcx = BuildCtx {
        name: "nf/f",
        ninputs: 1,
        noutputs: 1 + usize::from(shape >> 6),
        names: &names,
        base_dir: &base,
    };
    // The packet: PcapFilter and Classifier read the data; the IP filters the annotations
    // CheckIPHeader or MarkIPHeader set (network header at 14 or 0, or none).
    let mut p = Packet::from_bytes(frame);
    let net = match shape & 3 {
        0 => Some(14),
        1 => Some(0),
        2 => None,
        _ => Some(usize::from(shape >> 2 & 0xf)),
    };
    if let Some(off) = net {
        p.set_network_header(off);
        let hl = frame.get(off).map_or(0, |b| usize::from(b & 0x0f) * 4);
        if shape & 0x20 != 0 || hl < 20 {
            p.set_transport_header(off + hl);
        }
    }
    if class == "IPFilter" {
        let Ok(args) = elements::Args::parse(&text) else {
            return;
        };
        let Ok(mut f) = elements::ipfilter::IPFilter::configure(&args, &bcx) else {
            return;
        };
        assert_eq!(
            f.decide(&p),
            f.decide_from(&p, 0),
            "IPFilter({text}): the first-match index and the scan differ on {frame:02x?}"
        );
        check_model(&mut f, p, &format!("IPFilter({text})"));
        return;
    }
    if class == "PcapFilter" {
        if let Ok(f) = elements::pcapfilter::PcapFilter::from_expr(&text) {
            let _ = (f.matches(frame), f.pred().to_string());
            let _ = elements::pcapfilter::space::regions(f.pred());
        }
    }
    if let Ok(mut e) = elements::build(class, &text, &bcx) {
        check_model(e.as_mut(), p, &format!("{class}({text})"));
    }
}

// ---------------------------------------------------------------------------------------
// 6. ClassBench filter sets.

/// The ClassBench readers on `data` (lossily UTF-8): a filter set that parses compiles into
/// a classifier that classifies the corners of its rules, and the keys of the same text read
/// as a header trace, as a linear scan of the rules does; also after inserting and removing
/// a rule.
pub fn classbench(data: &[u8]) {
    use classify::classbench::{corners, parse_answers, parse_rules, parse_trace};
    use classify::Classifier;
    let text = String::from_utf8_lossy(data);
    let _ = parse_answers(&text, "fuzz");
    let trace = parse_trace(&text, "fuzz").unwrap_or_default();
    let Ok(rules) = parse_rules(&text, "fuzz") else {
        return;
    };
    if rules.is_empty() {
        return;
    }
    let mut keys = corners(&rules, 32, data.len() as u64);
    keys.extend(trace.iter().take(64));
    let Ok(mut c) = Classifier::new(rules.clone(), 5) else {
        return;
    };
    let check = |c: &Classifier, when: &str| {
        for k in &keys {
            assert_eq!(
                c.classify(k),
                c.classify_linear(k),
                "{when}: classifier and linear scan differ on {k:?}"
            );
        }
        let mut batch = vec![None; keys.len()];
        if c.classify_batch(&keys, &mut batch).is_ok() {
            for (k, b) in keys.iter().zip(&batch) {
                assert_eq!(
                    *b,
                    c.classify_linear(k),
                    "{when}: batch and scan differ on {k:?}"
                );
            }
        }
    };
    check(&c, "built");
    let last = rules[rules.len() - 1].clone();
    if c.insert(0, last).is_ok() {
        check(&c, "after insert");
        let _ = c.remove(rules.len() / 2);
        check(&c, "after remove");
    }
    let _ = c.stats();
}

// ---------------------------------------------------------------------------------------
// 7. Snort rules.

/// The Snort rule reader on the text before the first zero byte of `data` (also read as a
/// `snort.conf`), then `SnortIDS` built from the rules that parse running the bytes after it
/// as a frame (twice, so flow state is used): refused with an error or run, never a panic.
pub fn snort(data: &[u8]) {
    use elements::ids::rules::{RuleSet, Vars};
    use elements::ids::SnortIDS;
    let (text, frame) = text_and_bytes(data);
    let mut vars = Vars::new();
    let _ = vars.read_conf(&text, "fuzz.conf");
    let _ = RuleSet::parse(&text, "fuzz.rules", &Vars::new(), false);
    let Ok(set) = RuleSet::parse(&text, "fuzz.rules", &vars, true) else {
        return;
    };
    let Ok(mut ids) = SnortIDS::from_rules(set, None, None) else {
        return;
    };
    for i in 0..2u64 {
        let mut p = Packet::from_bytes(frame);
        p.set_network_header(14);
        let hl = frame.get(14).map_or(0, |b| usize::from(b & 0x0f) * 4);
        p.set_transport_header(14 + hl);
        p.meta.timestamp = Timestamp(i * 1_000_000_000);
        let mut cx = Context::new(p.meta.timestamp);
        let _ = ids.push(0, p, &mut cx);
    }
    let _ = (ids.alerts(), ids.alert_counts(), ids.state_dump());
}

// ---------------------------------------------------------------------------------------
// 8. Whole chains in every mode.

/// One example chain the [`chains`] target runs: the chain file (under `examples/`), the
/// entry its packets go to, and the exit reflected back in when asked (none when empty:
/// the chain's last NF has no `FromDevice` there).
pub const CHAINS: &[(&str, &str, &str)] = &[
    ("isp/chain.toml", "fw.eth0", "napt.eth1"),
    ("napts/chain.toml", "n1.eth0", "n10.eth1"),
    ("fig5/chain.toml", "napt.eth0", "lb.eth1"),
    ("speedybox/chain1.toml", "nat.eth0", "bl.eth1"),
    ("speedybox/chain2.toml", "bl.eth0", ""),
    ("routers/chain.toml", "r1.eth0", "r10.eth1"),
];

/// The golden configurations (`crates/fusebox/tests/golden/*/config.click`, sorted), which
/// the [`chains`] target also runs: each reads `FromDump(input.pcap)` and writes `ToDump`
/// files, one element family per configuration (ARP, ICMP errors, IP options, ...).
pub fn goldens() -> &'static [PathBuf] {
    static LIST: OnceLock<Vec<PathBuf>> = OnceLock::new();
    LIST.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fusebox/tests/golden");
        let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(|e| Some(e.ok()?.path().join("config.click")))
                    .filter(|p| p.is_file())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    })
}

/// What the first byte of a [`chains`] input runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// An example chain ([`CHAINS`] index).
    Example(usize),
    /// A golden configuration ([`goldens`] index).
    Golden(usize),
}

/// The chain `data[0]` of a [`chains`] input picks. Below 128: an example chain, the ISP
/// chain ([`CHAINS`]`[0]`) for one value in 16 and the others in turn for the rest
/// (installing the ISP chain's synthesized program, a thousand traffic classes, costs far
/// more than running a few packets, so it gets a smaller share of the executions). From
/// 128: the golden configurations in turn.
pub fn pick(byte: u8) -> Pick {
    let golden = goldens().len();
    match (byte >= 128, usize::from(byte % 16)) {
        (true, _) if golden > 0 => Pick::Golden(usize::from(byte - 128) % golden),
        (_, 0) => Pick::Example(0),
        (_, k) => Pick::Example(1 + (k - 1) % (CHAINS.len() - 1)),
    }
}

/// A chain loaded, synthesized and its program laid out once per process.
struct Prepared {
    chain: ChainFile,
    program: PreparedProgram,
}

fn prepare(chain: ChainFile, what: &Path) -> Prepared {
    let ex = Executor::new(&chain, &RunOptions::default(), |_, _| {
        Ok(ExitSink::Memory(Vec::new()))
    })
    .unwrap_or_else(|e| panic!("harness: {}: {e}", what.display()));
    let program = PreparedProgram::new(synth::synthesize(&ex).program);
    Prepared { chain, program }
}

/// One slot per chain, filled on first use.
type Slots = Vec<OnceLock<Prepared>>;

fn prepared(p: Pick) -> &'static Prepared {
    static CACHE: OnceLock<(Slots, Slots)> = OnceLock::new();
    let (ex, gold) = CACHE.get_or_init(|| {
        (
            CHAINS.iter().map(|_| OnceLock::new()).collect(),
            goldens().iter().map(|_| OnceLock::new()).collect(),
        )
    });
    match p {
        Pick::Example(i) => ex[i].get_or_init(|| {
            let path = examples().join(CHAINS[i].0);
            let chain = ChainFile::load(&path)
                .unwrap_or_else(|e| panic!("harness: {}: {e}", path.display()));
            prepare(chain, &path)
        }),
        Pick::Golden(i) => gold[i].get_or_init(|| {
            let path = &goldens()[i];
            prepare(ChainFile::single(path), path)
        }),
    }
}

/// The header of a classic pcap file: microseconds, little-endian, snapshot length 65535,
/// Ethernet.
pub const PCAP_HEADER: [u8; 24] = [
    0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0,
];

/// Whole-chain processing: `data[0]` picks an example chain or a golden configuration
/// ([`pick`]); bit 0 of `data[1]` reflects an example chain's far exit back in; the rest is
/// the records of a classic pcap file (the header is [`PCAP_HEADER`]): the input of the
/// example chain's entry, or the golden configuration's `input.pcap` (the configuration is
/// copied next to it into a scratch folder). The chain runs them in naive, synth and fastpath
/// mode, and `fusebox verify`'s comparison ([`synth::verify::compare`]) must find no
/// difference.
pub fn chains(data: &[u8]) {
    let (Some(&which), Some(&flags)) = (data.first(), data.get(1)) else {
        return;
    };
    let p = pick(which);
    let prep = prepared(p);
    let mut pcap = PCAP_HEADER.to_vec();
    pcap.extend_from_slice(&data[2..]);
    let mut options = RunOptions::default();
    // The scratch files, removed when this returns.
    let mut scratch = Vec::new();
    let (name, chain, inputs) = match p {
        Pick::Example(i) => {
            let (name, entry, far) = CHAINS[i];
            let file = Scratch::with("chains", &pcap);
            let entry = Endpoint::parse(entry).expect("harness: entry name");
            if flags & 1 != 0 && !far.is_empty() {
                options.reflect = vec![Endpoint::parse(far).expect("harness: exit name")];
            }
            let inputs = vec![(entry, file.0.clone())];
            scratch.push(file);
            (name.to_string(), prep.chain.clone(), inputs)
        }
        Pick::Golden(i) => {
            let config = &goldens()[i];
            let dir = Scratch::new("golden");
            let copy = dir.0.join("config.click");
            std::fs::create_dir_all(&dir.0)
                .and_then(|()| std::fs::copy(config, &copy).map(|_| ()))
                .and_then(|()| std::fs::write(dir.0.join("input.pcap"), &pcap))
                .unwrap_or_else(|e| panic!("harness: {}: {e}", dir.0.display()));
            scratch.push(dir);
            (
                config.display().to_string(),
                ChainFile::single(&copy),
                Vec::new(),
            )
        }
    };
    let run = |install: &dyn Fn(&mut Executor)| -> Result<RunResult, String> {
        run_installed(&chain, &inputs, &options, install).map_err(|e| e.to_string())
    };
    let naive = run(&|_| {});
    let synth = run(&|ex| ex.install_prepared(prep.program.clone()));
    let fast = run(&|ex| {
        synth::Mode::Fastpath.install(ex, chain::FastOptions::default());
    });
    drop(scratch);
    // The header is ours and the chains are the repository's: a run that cannot start is
    // the harness's fault (a cut or corrupt record only ends the input, in `errors`).
    if let Err(e) = &naive {
        panic!("harness: {name}: the naive run failed: {e}");
    }
    for (mode, other) in [("synth", &synth), ("fastpath", &fast)] {
        match (&naive, other) {
            (Ok(a), Ok(b)) => {
                let d = compare(a, b);
                if !d.is_empty() {
                    let shown: Vec<String> = d.iter().take(8).map(|d| d.to_string()).collect();
                    panic!(
                        "{name}: naive (a) and {mode} (b) differ in {} ways:\n{}",
                        d.len(),
                        shown.join("\n")
                    );
                }
            }
            (a, b) => {
                let msg = |r: &Result<RunResult, String>| r.as_ref().err().cloned();
                assert_eq!(msg(a), msg(b), "{name}: naive and {mode} errors");
            }
        }
    }
}
