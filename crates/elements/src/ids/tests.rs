//! Element tests: packets through `SnortIDS`.

use super::*;
use crate::record::Recorder;
use crate::{Args, BuildCtx, Names};
use packet::Meta;
use wire::build::Frame;

/// A scratch folder for one test, removed when dropped.
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("fusebox-ids-{name}-"))
        .tempdir()
        .expect("scratch folder")
}

fn make_in(dir: &Path, config: &str) -> Result<SnortIDS, ConfigError> {
    let names = Names::new();
    let bcx = BuildCtx {
        name: "nf/ids",
        ninputs: 1,
        noutputs: 1,
        names: &names,
        base_dir: dir,
    };
    SnortIDS::configure(&Args::parse(config)?, &bcx)
}

/// An IDS over `rules` (written to a file in a scratch folder), with extra arguments.
fn ids(name: &str, rules: &str, extra: &str) -> SnortIDS {
    let tmp = scratch(name);
    let d = tmp.path();
    std::fs::write(d.join("t.rules"), rules).unwrap();
    match make_in(d, &format!("t.rules{extra}")) {
        Ok(e) => e,
        Err(e) => panic!("refused: {e}"),
    }
}

fn ip(s: &str) -> [u8; 4] {
    s.parse::<Ipv4Addr>().unwrap().octets()
}

/// An Ethernet/IPv4 frame carrying `l4` with protocol `proto` (identification 1, no
/// checksums).
fn frame(proto: u8, src: &str, dst: &str, l4: &[u8]) -> Vec<u8> {
    Frame::ip(ip(src), ip(dst), proto)
        .ident(1)
        .payload(l4)
        .no_sums()
        .build()
}

fn tcp(src: &str, sport: u16, dst: &str, dport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    Frame::tcp(ip(src), ip(dst), sport, dport)
        .flags(flags)
        .payload(payload)
        .ident(1)
        .no_sums()
        .build()
}

fn udp(src: &str, sport: u16, dst: &str, dport: u16, payload: &[u8]) -> Vec<u8> {
    Frame::udp(ip(src), ip(dst), sport, dport)
        .payload(payload)
        .ident(1)
        .no_sums()
        .build()
}

fn pkt(data: &[u8], index: u64) -> Packet {
    let mut p = Packet::from_bytes(data);
    p.meta = Meta {
        // 2024-02-29 13:45:06.123456789 UTC
        timestamp: Timestamp::from_parts(1_709_214_306, 123_456_789),
        input_index: index,
        ..p.meta
    };
    p
}

/// Pushes and returns whether the packet was forwarded (false: dropped as `ids-drop`).
fn push(e: &mut SnortIDS, data: &[u8], index: u64) -> bool {
    let mut cx = Context::default();
    match e.push(0, pkt(data, index), &mut cx) {
        Verdict::Out(0, _) => true,
        Verdict::Drop(_, r) => {
            assert_eq!(r, DROP_REASON);
            false
        }
        v => panic!("unexpected verdict {v:?}"),
    }
}

fn stat(e: &SnortIDS, name: &str) -> u64 {
    e.stats()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no stat {name}"))
        .1
}

/// The `[gid:sid:rev]` of an alert line.
fn gsr(line: &str) -> &str {
    let start = line.find("] [").map_or(0, |i| i + 2);
    let end = line[start..]
        .find(']')
        .map_or(line.len(), |i| start + i + 1);
    &line[start..end]
}

const C: &str = "10.0.0.1";
const S: &str = "192.168.1.1";

#[test]
fn handshake_then_data_for_established_to_server() {
    let mut e = ids(
        "hs",
        "alert tcp any any -> any 80 (msg:\"GET to server\"; flow:established,to_server; content:\"GET \"; depth:4; classtype:web-application-activity; sid:100; rev:2;)\n\
         alert tcp any 80 -> any any (msg:\"reply\"; flow:to_client,established; content:\"200 OK\"; sid:101;)\n\
         alert tcp any any -> any any (msg:\"not est\"; flow:not_established; content:\"GET\"; sid:102;)\n",
        "",
    );
    // Data before the handshake is complete is not established.
    assert!(push(&mut e, &tcp(C, 4000, S, 80, SYN, b""), 0));
    assert!(push(&mut e, &tcp(S, 80, C, 4000, SYN | ACK, b""), 1));
    assert!(push(&mut e, &tcp(C, 4000, S, 80, ACK | 0x08, b"GET /x"), 2));
    assert!(push(
        &mut e,
        &tcp(S, 80, C, 4000, ACK, b"HTTP/1.1 200 OK"),
        3
    ));
    assert!(push(&mut e, &tcp(C, 4000, S, 80, ACK, b"xGET /"), 4)); // depth 4 misses
    assert_eq!(
        e.alerts(),
        &[
            "02/29-13:45:06.123456  [**] [1:100:2] GET to server [**] [Classification: access to a potentially vulnerable web application] [Priority: 2] {TCP} 10.0.0.1:4000 -> 192.168.1.1:80 [flow 0] [packet 2]".to_string(),
            "02/29-13:45:06.123456  [**] [1:101:0] reply [**] [Priority: 0] {TCP} 192.168.1.1:80 -> 10.0.0.1:4000 [flow 0] [packet 3]".to_string(),
        ]
    );
    assert_eq!(stat(&e, "alerts"), 2);
    assert_eq!(stat(&e, "flows"), 1);
    assert_eq!(e.alert_counts().get(&(1, 100)), Some(&1));
    // A flow picked up midstream is never established.
    let mut e2 = ids(
        "mid",
        "alert tcp any any -> any any (flow:established; content:\"GET\"; sid:1;)\nalert tcp any any -> any any (flow:to_server,not_established; content:\"GET\"; sid:2;)\n",
        "",
    );
    push(&mut e2, &tcp(C, 4000, S, 80, ACK, b"GET /"), 0);
    assert_eq!(
        e2.alert_counts().keys().copied().collect::<Vec<_>>(),
        vec![(1, 2)]
    );
    // A RST ends established.
    push(&mut e, &tcp(S, 80, C, 4000, RST, b""), 5);
    push(&mut e, &tcp(C, 4000, S, 80, ACK, b"GET /"), 6);
    assert_eq!(e.alert_counts().get(&(1, 100)), Some(&1));
    assert_eq!(e.alert_counts().get(&(1, 102)), Some(&1));
    assert!(e.state_dump().contains(
        &"flow 0 TCP 10.0.0.1:4000 <> 192.168.1.1:80 closed client 10.0.0.1:4000 packets 7"
            .to_string()
    ));
}

#[test]
fn udp_is_established_after_a_reply() {
    let mut e = ids(
        "udp",
        "alert udp any any -> any 53 (flow:established; content:\"q\"; sid:1;)\nalert udp any any -> any any (flow:to_client; content:\"r\"; sid:2;)\n",
        "",
    );
    push(&mut e, &udp(C, 5000, S, 53, b"q1"), 0);
    push(&mut e, &udp(S, 53, C, 5000, b"r1"), 1);
    push(&mut e, &udp(C, 5000, S, 53, b"q2"), 2);
    let sids: Vec<_> = e.alerts().iter().map(|a| gsr(a)).collect();
    assert_eq!(sids, vec!["[1:2:0]", "[1:1:0]"]);
    assert!(e.alerts()[1].ends_with("{UDP} 10.0.0.1:5000 -> 192.168.1.1:53 [flow 0] [packet 2]"));
}

#[test]
fn actions_drop_pass_and_their_order() {
    let rules = "alert tcp any any -> any any (msg:\"a\"; content:\"evil\"; sid:1;)\n\
                 pass tcp any any -> any any (content:\"ok\"; sid:2;)\n\
                 drop tcp any any -> any any (msg:\"d\"; content:\"evil\"; sid:3;)\n\
                 sdrop tcp any any -> any any (content:\"quiet\"; sid:4;)\n\
                 log tcp any any -> any any (content:\"log\"; sid:5;)\n";
    let mut e = ids("act", rules, "");
    assert!(!push(&mut e, &tcp(C, 1, S, 2, ACK, b"evil"), 0));
    assert!(
        push(&mut e, &tcp(C, 1, S, 2, ACK, b"evil ok"), 1),
        "pass first: no drop"
    );
    assert!(!push(&mut e, &tcp(C, 1, S, 2, ACK, b"quiet"), 2));
    assert!(push(&mut e, &tcp(C, 1, S, 2, ACK, b"log"), 3));
    let order: Vec<_> = e.alerts().iter().map(|a| gsr(a)).collect();
    // The drop rule (evaluated before alert rules) alerts first.
    assert_eq!(order, vec!["[1:3:0]", "[1:1:0]", "[1:5:0]"]);
    assert_eq!((stat(&e, "dropped"), stat(&e, "passed")), (2, 1));
    // ORDER alert pass drop: the alert fires, then pass stops the drop.
    let mut e = ids("order", rules, ", ORDER \"alert pass drop\"");
    assert!(push(&mut e, &tcp(C, 1, S, 2, ACK, b"evil ok"), 0));
    assert_eq!(e.alerts().len(), 1);
    assert!(e.alerts()[0].contains("[1:1:0] a"));
}

#[test]
fn headers_ports_and_variables() {
    let tmp = scratch("vars");
    let d = tmp.path();
    std::fs::write(
        d.join("snort.conf"),
        "ipvar HOME_NET 192.168.0.0/16\nportvar WEB [80,8080]\n",
    )
    .unwrap();
    std::fs::write(
        d.join("r.rules"),
        "alert tcp $EXTERNAL_NET any -> $HOME_NET $WEB (content:\"x\"; sid:1;)\nalert tcp any any <> $DMZ any (content:\"x\"; sid:2;)\n",
    )
    .unwrap();
    let mut e = make_in(d, "RULES r.rules, CONF snort.conf, VAR DMZ 172.16.0.0/12").unwrap();
    push(&mut e, &tcp(C, 1, S, 8080, ACK, b"x"), 0); // sid 1
    push(&mut e, &tcp(C, 1, S, 81, ACK, b"x"), 1); // nothing
    push(&mut e, &tcp(C, 1, "10.0.0.2", 80, ACK, b"x"), 2); // not HOME_NET
    push(&mut e, &tcp("172.16.0.9", 1, C, 9, ACK, b"x"), 3); // sid 2 (<>)
    let got: Vec<_> = e.alert_counts().iter().map(|(k, v)| (k.1, *v)).collect();
    assert_eq!(got, vec![(1, 1), (2, 1)]);
    // The variable from the configuration overrides the file's.
    let mut e = make_in(
        d,
        "RULES r.rules, CONF snort.conf, VAR DMZ 1.1.1.1, VAR HOME_NET 10.0.0.0/8",
    )
    .unwrap();
    push(&mut e, &tcp(S, 1, C, 80, ACK, b"x"), 0);
    assert_eq!(e.alerts().len(), 1);
}

#[test]
fn configuration_errors_say_what_and_where() {
    let tmp = scratch("cfg");
    let d = tmp.path();
    std::fs::write(d.join("u.rules"), "\nalert tcp any any -> any any (content:\"a\"; pcre:\"/a/\"; sid:1;)\nalert tcp any any -> any any (content:\"b\"; sid:2;)\n").unwrap();
    let err = |c: &str| make_in(d, c).err().map(|e| e.message).unwrap_or_default();
    assert!(err("").contains("missing argument RULES"));
    assert!(err("nope.rules").contains("nope.rules: cannot read it"));
    let m = err("u.rules");
    assert!(
        m.contains("u.rules:2:44: option `pcre` is not supported"),
        "{m}"
    );
    assert!(err("u.rules, SKIP_UNSUPPORTED maybe").contains("SKIP_UNSUPPORTED"));
    assert!(err("u.rules, COLOUR red").contains("unknown keyword"));
    assert!(err("u.rules, VAR HOME_NET").contains("VAR NAME VALUE"));
    assert!(err("u.rules, ORDER \"pass shout\"").contains("shout"));
    assert!(err("u.rules, CONF missing.conf").contains("missing.conf"));
    let e = make_in(d, "u.rules, SKIP_UNSUPPORTED true").unwrap();
    assert_eq!(
        (stat(&e, "rules_loaded"), stat(&e, "rules_skipped")),
        (1, 1)
    );
    // Through the element library, by name.
    let names = Names::new();
    let bcx = BuildCtx {
        name: "nf/ids",
        ninputs: 1,
        noutputs: 1,
        names: &names,
        base_dir: d,
    };
    let e = crate::build("SnortIDS", "RULES u.rules, SKIP_UNSUPPORTED true", &bcx).unwrap();
    assert_eq!(e.class_name(), "SnortIDS");
    assert_eq!(e.port_count(), PortCount::exact(1, 1));
}

#[test]
fn alerts_file_and_state_dump() {
    let tmp = scratch("file");
    let d = tmp.path();
    std::fs::write(d.join("r.rules"), "alert icmp any any -> any any (msg:\"ping\"; content:\"abc\"; sid:7; rev:1;)\nalert ip any any -> any any (msg:\"gre\"; content:\"abc\"; sid:8;)\n").unwrap();
    assert!(
        make_in(d, "r.rules, ALERTS out/../alerts.txt").is_err(),
        "the ALERTS folder must exist"
    );
    let mut e = make_in(d, "r.rules, ALERTS alerts.txt").unwrap();
    let mut icmp = vec![8, 0, 0, 0, 0, 1, 0, 1];
    icmp.extend_from_slice(b"xxabc");
    push(&mut e, &frame(1, C, S, &icmp), 9);
    push(&mut e, &frame(47, C, S, b"..abc"), 10);
    let text = std::fs::read_to_string(d.join("alerts.txt")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(
        lines[0].ends_with(
            "[1:7:1] ping [**] [Priority: 0] {ICMP} 10.0.0.1 -> 192.168.1.1 [flow 0] [packet 9]"
        ),
        "{}",
        lines[0]
    );
    assert!(lines[1].contains("[1:8:0] gre"));
    assert!(
        lines[2].ends_with("{GRE} 10.0.0.1 -> 192.168.1.1 [flow 1] [packet 10]"),
        "{}",
        lines[2]
    );
    let dump = e.state_dump();
    assert_eq!(dump[0], format!("alert {}", lines[0]));
    assert!(dump.contains(&"sid 1:7 alerts 1".to_string()));
    assert!(dump.contains(&"sid 1:8 alerts 2".to_string()));
}

#[test]
fn payload_is_bounded_and_malformed_packets_pass_counted() {
    let mut e = ids(
        "mal",
        "alert ip any any -> any any (content:\"PAD\"; sid:1;)\nalert udp any any -> any any (dsize:3; sid:2;)\n",
        "",
    );
    // Ethernet padding after the IP length is not payload.
    let mut f = udp(C, 1, S, 2, b"abc");
    f.extend_from_slice(b"PADPADPAD");
    assert!(push(&mut e, &f, 0));
    assert_eq!(
        e.alert_counts().keys().map(|k| k.1).collect::<Vec<_>>(),
        vec![2]
    );
    assert!(push(&mut e, &[0u8; 10], 1));
    let mut bad = tcp(C, 1, S, 2, ACK, b"");
    bad[14] = 0x43; // IHL 3
    assert!(push(&mut e, &bad, 2));
    let short = &tcp(C, 1, S, 2, ACK, b"")[..40];
    let mut short = short.to_vec();
    short[16..18].copy_from_slice(&26u16.to_be_bytes());
    assert!(push(&mut e, &short, 3));
    assert_eq!(
        (
            stat(&e, "not_ipv4"),
            stat(&e, "bad_ip_header"),
            stat(&e, "truncated_transport")
        ),
        (1, 1, 1)
    );
    assert_eq!((stat(&e, "packets"), stat(&e, "inspected")), (4, 1));
    // A raw IPv4 packet (no Ethernet header) and one at the annotation.
    let raw = udp(C, 1, S, 2, b"PAD")[14..].to_vec();
    assert!(push(&mut e, &raw, 4));
    let mut p = pkt(&udp(C, 1, S, 2, b"xyz"), 5);
    p.set_network_header(14);
    e.push(0, p, &mut Context::default());
    assert_eq!(stat(&e, "alerts"), 4);
}

/// A context that records the next push.
fn recording() -> Context {
    let mut cx = Context::default();
    cx.recorder = Recorder {
        active: true,
        ..Recorder::default()
    };
    cx.recorder.begin();
    cx
}

#[test]
fn replay_does_what_push_does() {
    let rules = "alert tcp any any -> any 80 (flow:established,to_server; content:\"attack\"; nocase; sid:1;)\n\
                 alert udp any any -> any any (flow:established; content:\"x\"; sid:2;)\n\
                 alert tcp any 80 -> any any (content:\"leak\"; sid:3;)\n";
    let trace: Vec<Vec<u8>> = vec![
        tcp(C, 4000, S, 80, SYN, b""),                  // recorded (guard: SYN)
        tcp(S, 80, C, 4000, SYN | ACK, b""),            // recorded (guard: SYN+ACK)
        tcp(C, 4000, S, 80, ACK, b""),                  // guard miss: recorded, now established
        tcp(C, 4000, S, 80, ACK | 0x08, b"ATTACK one"), // replayed
        tcp(C, 4000, S, 80, ACK | 0x08, b"no"),
        tcp(C, 4000, S, 80, ACK, b"attack two"),
        tcp(S, 80, C, 4000, ACK, b"leak"), // guard miss (other direction): recorded
        tcp(S, 80, C, 4000, ACK, b"leak again"),
        udp(C, 5, S, 6, b"x1"), // recorded: one-way
        udp(C, 5, S, 6, b"x2"),
        udp(S, 6, C, 5, b"x3"), // reply: recorded
        udp(C, 5, S, 6, b"x4"), // check says no (now established): recorded again
        udp(C, 5, S, 6, b"x5"),
    ];
    let mut naive = ids("rp-naive", rules, "");
    for (i, f) in trace.iter().enumerate() {
        push(&mut naive, f, i as u64);
    }
    // The same trace where a recorded flow direction's later packets are replayed.
    let mut fast = ids("rp-fast", rules, "");
    // An executor's entries: token and guards per flow direction.
    type Entries = HashMap<(Vec<u8>, Vec<u8>), (u64, Vec<Filter>)>;
    let mut entries: Entries = HashMap::new();
    let mut replayed = 0;
    for (i, f) in trace.iter().enumerate() {
        let key = (f[26..30].to_vec(), f[30..38].to_vec()); // source; destination and ports
        let flags = if f[23] == IpProtocol::TCP { f[47] } else { 0 };
        let guarded = |g: &[Filter]| {
            g.iter()
                .all(|g| g.get(Field::TcpFlags).contains(u128::from(flags)))
        };
        if let Some((token, _)) = entries.get(&key).filter(|(_, g)| guarded(g)) {
            let token = *token;
            let mut data = f.clone();
            let mut view = ReplayView {
                data: &mut data,
                ip: None,
                now: Timestamp::from_parts(1_709_214_306, 123_456_789),
                clock: Timestamp::from_parts(1_709_214_306, 123_456_789),
                input_index: i as u64,
            };
            if fast.check(token, &view) {
                fast.replay(token, &mut view, &mut Context::default());
                replayed += 1;
                continue;
            }
        }
        // No entry, a guard miss or a failed check: the packet walks and is recorded.
        let mut cx = recording();
        let out = fast.push(0, pkt(f, i as u64), &mut cx);
        assert!(matches!(out, Verdict::Out(0, _)));
        let step = cx.recorder.take();
        assert_eq!(step.states.len(), 1);
        assert_eq!(step.states[0].1, Access::Read);
        assert_eq!(step.opaque, None);
        if f[23] == IpProtocol::TCP {
            assert_eq!(step.guards.len(), 1, "TCP records a flags guard");
            let g = step.guards[0].get(Field::TcpFlags);
            assert!(g.contains(u128::from(flags)));
            if i >= 2 {
                // Established: data packets pass, SYN/FIN/RST do not.
                assert!(g.contains(0x18) && g.contains(0x10));
                assert!(!g.contains(0x11) && !g.contains(0x14) && !g.contains(0x12));
            } else {
                // Handshake: only the same SYN/ACK bits pass.
                assert!(!g.contains(u128::from(flags ^ ACK)));
                assert!(g.contains(u128::from(flags | 0x08)), "PSH does not matter");
            }
        } else {
            assert!(step.guards.is_empty());
        }
        entries.insert(key, (step.states[0].0, step.guards));
    }
    assert_eq!(replayed, 6, "packets 3, 4, 5, 7, 9 and 12 replayed");
    assert_eq!(naive.state_dump(), fast.state_dump());
    assert_eq!(naive.stats(), fast.stats());
    assert_eq!(naive.alerts().len(), 7);
}

#[test]
fn check_refuses_when_a_drop_verdict_would_change() {
    let rules = "drop tcp any any -> any any (content:\"bad\"; sid:1;)\nalert tcp any any -> any any (content:\"x\"; sid:2;)\n";
    let mut e = ids("chk", rules, "");
    for (i, f) in [
        tcp(C, 1, S, 2, SYN, b""),
        tcp(S, 2, C, 1, SYN | ACK, b""),
        tcp(C, 1, S, 2, ACK, b""),
    ]
    .iter()
    .enumerate()
    {
        push(&mut e, f, i as u64);
    }
    let mut cx = recording();
    assert!(matches!(
        e.push(0, pkt(&tcp(C, 1, S, 2, ACK, b"x"), 3), &mut cx),
        Verdict::Out(..)
    ));
    let token = cx.recorder.take().states[0].0;
    let ok = tcp(C, 1, S, 2, ACK, b"xx");
    let bad = tcp(C, 1, S, 2, ACK, b"a bad x");
    let fin = tcp(C, 1, S, 2, ACK | FIN, b"");
    let before = e.state_dump();
    assert!(chk(&mut e, token, &ok));
    assert!(!chk(&mut e, token, &bad));
    assert!(!chk(&mut e, token, &fin));
    assert!(!chk(&mut e, token + 2, &ok), "unknown token");
    assert_eq!(before, e.state_dump(), "check changes nothing");
    assert_eq!(stat(&e, "packets"), 4);
    // A flow recorded with a drop verdict: later packets that would pass are refused.
    let mut cx = recording();
    assert!(matches!(
        e.push(0, pkt(&bad, 4), &mut cx),
        Verdict::Drop(_, DROP_REASON)
    ));
    let token = cx.recorder.take().states[0].0;
    assert!(chk(&mut e, token, &bad));
    assert!(!chk(&mut e, token, &ok));
}

/// `check` on a view of `data` (IPv4 header at 14).
fn chk(e: &mut SnortIDS, token: u64, data: &[u8]) -> bool {
    let mut d = data.to_vec();
    let view = ReplayView {
        data: &mut d,
        ip: Some(14),
        now: Timestamp(0),
        clock: Timestamp(0),
        input_index: 0,
    };
    e.check(token, &view)
}

#[test]
fn timestamps_are_snort_fast_times() {
    assert_eq!(
        fast_time(Timestamp::from_parts(0, 0)),
        "01/01-00:00:00.000000"
    );
    assert_eq!(
        fast_time(Timestamp::from_parts(951_782_400 + 86_399, 999_999_999)),
        "02/29-23:59:59.999999"
    );
    assert_eq!(
        fast_time(Timestamp::from_parts(1_735_689_599, 1_000)),
        "12/31-23:59:59.000001"
    );
}

proptest::proptest! {
    /// Arbitrary bytes (raw, after an Ethernet header, or at an arbitrary annotation) never
    /// make the element panic, and every packet is counted once.
    #[test]
    fn arbitrary_packets_never_panic(
        frames in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..120), 1..12),
        anno in proptest::option::of(0usize..140),
        token in 0u64..64,
    ) {
        let mut e = ids(
            "fuzz",
            "alert ip any any -> any any (content:\"A\"; isdataat:2,relative; sid:1;)\n\
             drop tcp any any -> any any (flow:established; content:!\"B\"; sid:2;)\n\
             alert udp any any -> any any (dsize:1<>9; sid:3;)\n",
            "",
        );
        for (i, f) in frames.iter().enumerate() {
            let mut data = f.clone();
            if i % 2 == 1 && data.len() > 14 {
                data[12] = 0x08;
                data[13] = 0x00;
                data[14] = 0x45;
            }
            let mut p = pkt(&data, i as u64);
            if let Some(o) = anno.filter(|o| *o <= data.len()) {
                p.set_network_header(o);
            }
            e.push(0, p, &mut recording());
            let mut view = ReplayView { data: &mut data, ip: anno, now: Timestamp(0), clock: Timestamp(0), input_index: 0 };
            if e.check(token, &view) {
                e.replay(token, &mut view, &mut Context::default());
            }
        }
        let s = |n: &str| stat(&e, n);
        proptest::prop_assert!(s("packets") >= frames.len() as u64);
        proptest::prop_assert_eq!(
            s("packets"),
            s("inspected") + s("not_ipv4") + s("bad_ip_header") + s("truncated_transport")
        );
    }
}

#[test]
fn flow_capacity_and_alert_memory_bound_the_state() {
    let rules = "alert udp any any -> any any (msg:\"x\"; content:\"x\"; sid:1;)\n\
                 alert udp any any -> any any (msg:\"est\"; flow:established; content:\"x\"; sid:2;)\n";
    let mut e = ids("cap", rules, ", FLOW_CAPACITY 2, ALERT_MEMORY 3");
    let udp = |sport: u16, from_server: bool| {
        let f = Frame::udp(ip(C), ip(S), sport, 53)
            .payload(b"x")
            .ident(1)
            .no_sums();
        if from_server {
            Frame::udp(ip(S), ip(C), 53, sport)
                .payload(b"x")
                .ident(1)
                .no_sums()
                .build()
        } else {
            f.build()
        }
    };
    // Flows 1 and 2 are kept; flow 3 finds the table full.
    for (i, sport) in [1u16, 2, 3].into_iter().enumerate() {
        assert!(push(&mut e, &udp(sport, false), i as u64));
    }
    // A reply establishes flow 1 (kept) but not flow 3 (each of its packets is a first).
    assert!(push(&mut e, &udp(1, true), 3));
    assert!(push(&mut e, &udp(3, true), 4));
    let st: BTreeMap<&str, u64> = e.stats().into_iter().collect();
    assert_eq!(st["flows"], 2);
    assert_eq!(st["untracked"], 2);
    // sid 1 on all five packets, sid 2 on flow 1's reply: six alerts, three kept.
    assert_eq!(st["alerts"], 6);
    assert_eq!(st["alerts_not_kept"], 3);
    assert_eq!(e.alerts().len(), 3);
    assert!(
        e.alerts()[2].ends_with("[flow -] [packet 2]"),
        "{}",
        e.alerts()[2]
    );
    let dump = e.state_dump();
    assert!(
        dump.contains(&"alerts not kept in memory 3".to_string()),
        "{dump:?}"
    );
    assert!(dump.contains(&"sid 1:2 alerts 1".to_string()), "{dump:?}");
    // A packet of a flow left out is opaque to the fast path.
    let mut cx = recording();
    e.push(0, pkt(&udp(9, false), 5), &mut cx);
    assert!(cx.recorder.take().opaque.is_some());
    let tmp = scratch("cap-bad");
    let d = tmp.path();
    std::fs::write(d.join("t.rules"), rules).unwrap();
    assert!(make_in(d, "t.rules, FLOW_CAPACITY 5").is_ok());
    let bad = make_in(d, "t.rules, FLOW_CAPACITY many")
        .err()
        .map(|e| e.to_string());
    assert!(bad.is_some_and(|m| m.contains("FLOW_CAPACITY")));
}
