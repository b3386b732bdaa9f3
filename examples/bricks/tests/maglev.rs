//! `MaglevNF` (operators) against the `Maglev` element configured the same way
//! (`examples/speedybox/lb.click`, its schedule failing `web3` at input 3000 and bringing it
//! back at 7000): one trace of forward packets, backend replies and packets to drop, pushed
//! into both; every packet must leave by the same output with the same bytes or be dropped
//! for the same reason, and the counters and the state dump must agree at the end.

use elements::{BuildCtx, Context, Element, Names, Verdict};
use packet::{Packet, Timestamp};
use std::path::PathBuf;
use wire::build::Frame;

fn speedybox() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../speedybox")
}

/// The arguments of `lb.click`'s `Maglev(...)`, `$TIMEOUT` given, `extra` appended.
fn lb_args(timeout: &str, extra: &str) -> String {
    let click = std::fs::read_to_string(speedybox().join("lb.click")).unwrap();
    let start = click.find("Maglev(").unwrap() + "Maglev(".len();
    let end = start + click[start..].find(");").unwrap();
    format!("{}{extra}", click[start..end].replace("$TIMEOUT", timeout))
}

fn build(class: &str, args: &str) -> Box<dyn Element> {
    bricks::register().unwrap();
    let names = Names::default();
    let dir = speedybox();
    let bcx = BuildCtx {
        name: "lb/lb",
        ninputs: 2,
        noutputs: 2,
        names: &names,
        base_dir: &dir,
    };
    elements::build(class, args, &bcx).unwrap_or_else(|e| panic!("{class}: {e}"))
}

/// Where a packet went: out of a port with its bytes, or dropped with a reason.
#[derive(Debug, PartialEq, Eq)]
enum Went {
    Out(usize, Vec<u8>),
    Drop(&'static str),
}

fn push(e: &mut dyn Element, port: usize, frame: &[u8], index: u64, now: u64) -> Vec<Went> {
    let mut p = Packet::from_bytes(frame);
    p.meta.input_index = index;
    p.meta.timestamp = Timestamp(now);
    p.set_network_header(14);
    let mut cx = Context::new(Timestamp(now));
    let mut went = match e.push(port, p, &mut cx) {
        Verdict::Out(o, p) => vec![Went::Out(o, p.data().to_vec())],
        Verdict::Drop(_, r) => vec![Went::Drop(r)],
        Verdict::Done => Vec::new(),
    };
    went.extend(
        cx.take_emitted()
            .map(|(o, p)| Went::Out(o, p.data().to_vec())),
    );
    went.extend(cx.take_dropped().map(|(_, r)| Went::Drop(r)));
    went
}

/// A deterministic pseudo-random sequence (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The reply a backend sends to a forwarded frame: addresses, ports and MACs swapped.
fn reply_to(frame: &[u8]) -> Vec<u8> {
    let mut r = frame.to_vec();
    let (a, b) = r.split_at_mut(6);
    a.swap_with_slice(&mut b[..6]);
    for (x, y) in [(26, 30), (27, 31), (28, 32), (29, 33), (34, 36), (35, 37)] {
        r.swap(x, y);
    }
    r
}

/// Runs `packets` input packets (their replies come in between) through both and compares.
fn compare(args: &str, packets: u64, gap_ns: u64, seed: u64) -> Outcome {
    let mut reference = build("Maglev", args);
    let mut nf = build("MaglevNF", args);
    let mut rng = Rng(seed);
    let (mut now, mut replies) = (1_000_000_000u64, 0);
    let mut drops = std::collections::BTreeMap::new();
    let mut old: Vec<Vec<u8>> = Vec::new();
    for index in 0..packets {
        now += rng.next(gap_ns);
        let f = rng.next(150) as u8;
        let client = [10, 0, f / 50, f];
        let vip = [198, 51, 100, 1 + f % 3];
        let sport = 1024 + u16::from(f) * 7;
        let kind = rng.next(40);
        let frame = match kind {
            0 => Frame::icmp(client, vip, 8, 0).build(),
            1 => {
                // A later fragment: no ports to balance on.
                let mut fr = Frame::udp(client, vip, sport, 53).build();
                fr[20] = 0x00;
                fr[21] = 0x10;
                fr
            }
            2 => Frame::tcp(client, vip, sport, 80).build()[..14 + 20 + 12].to_vec(),
            // A reply to no flow (on input 1), or to a flow answered long ago.
            3 => Frame::udp([10, 0, 1, 1 + f % 5], client, 53, sport).build(),
            4 if !old.is_empty() => reply_to(&old[rng.next(old.len() as u64) as usize]),
            k if k % 2 == 0 => Frame::tcp(client, vip, sport, 80).payload(&[f; 10]).build(),
            _ => Frame::udp(client, vip, sport, 53).payload(&[f; 3]).build(),
        };
        let port = usize::from(kind == 3 || (kind == 4 && !old.is_empty()));
        let (a, b) = (
            push(reference.as_mut(), port, &frame, index, now),
            push(nf.as_mut(), port, &frame, index, now),
        );
        assert_eq!(a, b, "input packet {index} at {now}");
        if let [Went::Drop(r)] = a[..] {
            *drops.entry(r).or_insert(0u64) += 1;
        }
        if let [Went::Out(0, out)] = &a[..] {
            if rng.next(20) == 0 {
                old.push(out.clone());
            }
            if rng.next(3) != 0 {
                // The backend answers (input 1), a little later.
                now += rng.next(gap_ns / 4 + 1);
                let r = reply_to(out);
                let (a, b) = (
                    push(reference.as_mut(), 1, &r, index, now),
                    push(nf.as_mut(), 1, &r, index, now),
                );
                assert_eq!(a, b, "reply to input packet {index} at {now}");
                replies += u64::from(matches!(a[..], [Went::Out(1, _)]));
                if let [Went::Drop(r)] = a[..] {
                    *drops.entry(r).or_insert(0u64) += 1;
                }
            }
        }
    }
    assert_eq!(reference.stats(), nf.stats());
    let (a, b) = (reference.state_dump(), nf.state_dump());
    let first = a.iter().zip(&b).position(|(x, y)| x != y);
    assert!(
        a == b,
        "state: {} vs {} lines, first difference at {first:?}: {:?} vs {:?}",
        a.len(),
        b.len(),
        first.map(|i| &a[i]),
        first.map(|i| &b[i])
    );
    Outcome {
        state: b,
        replies,
        drops,
        stats: nf.stats(),
    }
}

/// What a comparison saw (both alike).
struct Outcome {
    state: Vec<String>,
    replies: u64,
    drops: std::collections::BTreeMap<&'static str, u64>,
    stats: Vec<(&'static str, u64)>,
}

#[test]
fn maglev_nf_behaves_as_the_maglev_element_on_lb_click() {
    // lb.click with `--define TIMEOUT=2s`: entries expire between a flow's packets.
    let o = compare(&lb_args("2s", ""), 10_000, 40_000_000, 7);
    assert!(o.replies > 1000, "{}", o.replies);
    assert!(o.state[0].contains("rebuilds 2"), "{}", o.state[0]);
    assert!(o.state.iter().any(|l| l.starts_with("conn ")));
    assert!(o
        .state
        .iter()
        .any(|l| l.starts_with("backend web3 10.0.1.3 up")));
    // Every drop reason of the element's happened (no-backend aside: web3 alone fails).
    for r in [
        "no-connection",
        "not-tcp-udp",
        "ip-fragment",
        "short-transport",
    ] {
        assert!(o.drops.get(r).is_some_and(|n| *n > 0), "{r}: {:?}", o.drops);
    }
    let stat = |o: &Outcome, k: &str| o.stats.iter().find(|s| s.0 == k).map_or(0, |s| s.1);
    assert!(stat(&o, "evicted") > 0);
    // As configured (60 s), and with a small connection table that fills (untracked
    // flows) and reaping every 3 s.
    compare(&lb_args("60s", ""), 8_000, 5_000_000, 11);
    let o = compare(
        &lb_args("1s", ", CAPACITY 40, REAP_INTERVAL 3s"),
        9_000,
        30_000_000,
        3,
    );
    assert!(stat(&o, "untracked") > 0);
}

#[test]
fn a_control_plane_update_reaches_the_workers_within_the_bound() {
    use bricks::maglev::{pipeline, Backend, Control, Flows};
    use operators::nf::Leave;
    use operators::{Cx, Input, Pkt, Raw, Stage};
    let backends: Vec<Backend> = (1..=3)
        .map(|i| Backend {
            name: format!("b{i}"),
            ip: [10, 0, 1, i].into(),
            mac: [2, 0, 0, 0, 1, i],
        })
        .collect();
    // The control plane publishes every 2 updates; two workers read the table.
    let (mut control, table) = Control::new(&backends, 0, 2, Vec::new());
    let mut workers: Vec<_> = (0..2)
        .map(|_| {
            let flows = Flows::new(&backends, table.clone(), 0, [u64::MAX, 0], 1 << 16);
            pipeline(backends.clone(), None, flows, false)
        })
        .collect();
    let flows: Vec<Vec<u8>> = (0..300u16)
        .map(|i| {
            Frame::udp(
                [10, 0, (i >> 8) as u8, i as u8],
                [198, 51, 100, 1],
                1000 + i,
                53,
            )
            .build()
        })
        .collect();
    // The destination each worker gives each flow.
    fn dests<S: Stage<Pkt<Raw, Input>>>(workers: &mut [S], flows: &[Vec<u8>]) -> Vec<Vec<[u8; 4]>>
    where
        S::Out: Leave,
    {
        let mut cx = Cx::default();
        workers
            .iter_mut()
            .map(|w| {
                flows
                    .iter()
                    .map(|f| {
                        let p = Pkt::new(Packet::from_bytes(f)).with_meta(Input(0));
                        let out = w.run(p, &mut cx).unwrap().into_packet();
                        out.data()[30..34].try_into().unwrap()
                    })
                    .collect()
            })
            .collect()
    }
    let before = dests(&mut workers, &flows);
    assert_eq!(before[0], before[1]);
    assert!(before[0].contains(&[10, 0, 1, 2]));
    // One update (b2 down): not published yet, the workers keep b2.
    control.set(1, false);
    assert_eq!(dests(&mut workers, &flows)[0], before[0]);
    // The second update (b3 down) makes two: both workers see both at once.
    control.set(2, false);
    for d in dests(&mut workers, &flows) {
        assert!(d.iter().all(|a| *a == [10, 0, 1, 1]), "{d:?}");
    }
}

#[test]
fn split_gives_each_backend_its_own_output() {
    // Listing 3's shape: output i for backend i (web1..web5 are 10.0.1.1..5), replies on 5.
    let args = lb_args("60s", "");
    let mut reference = build("Maglev", &args);
    let mut split = build("MaglevNF", &format!("{args}, SPLIT true"));
    let mut seen = [0u64; 6];
    for i in 0..3000u64 {
        let f = (i % 97) as u8;
        let frame = Frame::tcp([10, 0, 3, f], [198, 51, 100, 1], 2000 + u16::from(f), 443)
            .payload(&[f; 4])
            .build();
        let now = 1_000_000_000 + i * 1_000_000;
        let a = push(reference.as_mut(), 0, &frame, i, now);
        let b = push(split.as_mut(), 0, &frame, i, now);
        let [Went::Out(0, out)] = &a[..] else {
            panic!("{a:?}")
        };
        let port = usize::from(out[33]) - 1;
        assert_eq!(b, [Went::Out(port, out.clone())], "packet {i}");
        seen[port] += 1;
        let r = reply_to(out);
        let (a, b) = (
            push(reference.as_mut(), 1, &r, i, now),
            push(split.as_mut(), 1, &r, i, now),
        );
        let [Went::Out(1, back)] = &a[..] else {
            panic!("{a:?}")
        };
        assert_eq!(b, [Went::Out(5, back.clone())]);
        seen[5] += 1;
    }
    // Every backend got flows (the schedule fails web3 at input 3000: not reached here).
    assert!(seen.iter().all(|n| *n > 0), "{seen:?}");
    assert_eq!(reference.state_dump(), split.state_dump());
}

#[test]
fn maglev_on_two_workers_behind_a_shuffle_reads_one_control_plane() {
    use bricks::maglev::{pipeline, Backend, Control, Flows};
    use operators::runtime::{by_flow, MemoryTx, Runtime};
    use operators::{pipe, Input, Raw};
    use ports::pcap::Record;
    let backends: Vec<Backend> = (1..=4)
        .map(|i| Backend {
            name: format!("b{i}"),
            ip: [10, 0, 1, i].into(),
            mac: [2, 0, 0, 0, 1, i],
        })
        .collect();
    // One control plane, every update published at once; b2 fails before the run.
    let (mut control, table) = Control::new(&backends, 0, 1, Vec::new());
    control.set(1, false);
    let records: Vec<Record> = (0..1000u32)
        .map(|i| {
            let f = (i % 200) as u16;
            let data = Frame::udp(
                [10, 9, (f >> 8) as u8, f as u8],
                [198, 51, 100, 7],
                3000 + f,
                53,
            )
            .payload(&i.to_be_bytes())
            .build();
            Record {
                timestamp: Timestamp(1_000 + u64::from(i)),
                precision: packet::Precision::Nano,
                orig_len: data.len() as u32,
                data,
            }
        })
        .collect();
    let out = MemoryTx::new();
    let frames = out.frames();
    let mut rt = Runtime::new(2);
    rt.rx(ports::port::MemoryRx::new("clients", records));
    rt.tx(out);
    let report = rt
        .run(|w| {
            let flows = Flows::new(&backends, table.clone(), 0, [u64::MAX, 0], 1 << 16);
            let nf = pipeline(backends.clone(), None, flows, false);
            pipe::<Raw, Input>()
                .shuffle(w, by_flow(), |_, rest| rest.then(nf))
                .into_stage()
        })
        .unwrap();
    let frames = frames.lock().unwrap();
    assert_eq!(frames.len(), 1000);
    let mut backend_of = std::collections::BTreeMap::new();
    for (_, f) in frames.iter() {
        let (client, dst) = (f[26..30].to_vec(), f[30..34].to_vec());
        assert_ne!(dst, [10, 0, 1, 2], "b2 is down");
        assert_eq!(*backend_of.entry(client).or_insert(dst.clone()), dst);
    }
    assert_eq!(backend_of.len(), 200);
    // Each worker tracked its own flows: 200 connections between them, both busy.
    let conns: Vec<usize> = report
        .workers
        .iter()
        .map(|w| w.state.iter().filter(|l| l.starts_with("conn ")).count())
        .collect();
    assert_eq!(conns.iter().sum::<usize>(), 200);
    assert!(conns.iter().all(|n| *n > 0), "{conns:?}");
}
