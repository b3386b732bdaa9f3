//! IPClassifier / IPFilter: every primitive and operator, keyword elision, errors, element
//! behaviour (outputs, drop reasons, port counts), and a parser fuzz property.

use elements::ipfilter::{parse_pattern, Base, CmpOp, Expr, FilterAction, IPFilter, Test, View};
use elements::{build, BuildCtx, Context, Names, PortCount, Verdict};
use packet::Packet;
use proptest::prelude::*;
use std::path::Path;
use wire::IpProtocol;

/// A packet description for building test frames.
#[derive(Clone)]
struct Pkt {
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    ttl: u8,
    tos: u8,
    id: u16,
    frag: u16,
    options: usize,
    sport: u16,
    dport: u16,
    flags: u8,
    win: u16,
    icmp_type: u8,
    payload: usize,
}

impl Default for Pkt {
    fn default() -> Pkt {
        Pkt {
            src: [10, 0, 0, 1],
            dst: [192, 168, 1, 2],
            proto: IpProtocol::TCP,
            ttl: 64,
            tos: 0,
            id: 0x1234,
            frag: 0,
            options: 0,
            sport: 1234,
            dport: 80,
            flags: 0x02,
            win: 8192,
            icmp_type: 8,
            payload: 0,
        }
    }
}

impl Pkt {
    /// The IP packet bytes.
    fn ip(&self) -> Vec<u8> {
        let mut l4 = Vec::new();
        match self.proto {
            6 => {
                l4.extend_from_slice(&self.sport.to_be_bytes());
                l4.extend_from_slice(&self.dport.to_be_bytes());
                l4.extend_from_slice(&[0; 8]);
                l4.push(0x50);
                l4.push(self.flags);
                l4.extend_from_slice(&self.win.to_be_bytes());
                l4.extend_from_slice(&[0; 4]);
            }
            17 => {
                l4.extend_from_slice(&self.sport.to_be_bytes());
                l4.extend_from_slice(&self.dport.to_be_bytes());
                l4.extend_from_slice(&[0, 8, 0, 0]);
            }
            1 => l4.extend_from_slice(&[self.icmp_type, 0, 0, 0, 0, 0, 0, 0]),
            _ => l4.extend_from_slice(&[0xaa; 8]),
        }
        l4.extend(std::iter::repeat_n(0x55, self.payload));
        let hl = 20 + 4 * self.options;
        let total = (hl + l4.len()) as u16;
        let mut ip = vec![0x40 | (hl / 4) as u8, self.tos];
        ip.extend_from_slice(&total.to_be_bytes());
        ip.extend_from_slice(&self.id.to_be_bytes());
        ip.extend_from_slice(&self.frag.to_be_bytes());
        ip.extend_from_slice(&[self.ttl, self.proto, 0, 0]);
        ip.extend_from_slice(&self.src);
        ip.extend_from_slice(&self.dst);
        ip.extend(std::iter::repeat_n(1u8, 4 * self.options));
        ip.extend_from_slice(&l4);
        ip
    }
}

fn names() -> Names {
    let mut n = Names::new();
    n.add_address_info("lan 192.168.1.0/24, gw 10.0.0.254, INSIDE 10.0.0.0/8")
        .unwrap();
    n
}

fn m(pattern: &str, p: &Pkt) -> bool {
    let e = parse_pattern(pattern, &names()).unwrap_or_else(|e| panic!("`{pattern}`: {e}"));
    e.matches(&View::from_ip(&p.ip()))
}

fn err(pattern: &str) -> String {
    match parse_pattern(pattern, &names()) {
        Ok(e) => panic!("`{pattern}` parsed as {e}"),
        Err(e) => e.message,
    }
}

fn tcp() -> Pkt {
    Pkt::default()
}
fn udp() -> Pkt {
    Pkt {
        proto: IpProtocol::UDP,
        sport: 5353,
        dport: 53,
        ..Pkt::default()
    }
}
fn icmp() -> Pkt {
    Pkt {
        proto: IpProtocol::ICMP,
        ..Pkt::default()
    }
}

#[test]
fn protocols() {
    assert!(m("tcp", &tcp()) && !m("tcp", &udp()));
    assert!(m("udp", &udp()) && !m("udp", &icmp()));
    assert!(m("icmp", &icmp()) && !m("icmp", &tcp()));
    assert!(m("ip proto tcp", &tcp()) && !m("ip proto tcp", &udp()));
    assert!(m("ip proto 17", &udp()));
    assert!(m("proto 1", &icmp()));
    assert!(m("ip proto != 6", &udp()) && !m("ip proto != 6", &tcp()));
    assert!(m("ip proto > 6", &udp()) && !m("ip proto > 6", &tcp()));
    assert!(m("ip proto < 6", &icmp()));
    assert!(m("ip proto tcpudp", &udp()) && !m("ip proto tcpudp", &icmp()));
    assert!(m(
        "ip proto gre",
        &Pkt {
            proto: 47,
            ..Pkt::default()
        }
    ));
    // Elision: a bare number after `ip proto` is another protocol.
    assert!(m("ip proto 1 or 17", &udp()) && !m("ip proto 1 or 17", &tcp()));
}

#[test]
fn hosts_and_nets() {
    let p = tcp(); // 10.0.0.1 -> 192.168.1.2
    assert!(m("src host 10.0.0.1", &p) && !m("dst host 10.0.0.1", &p));
    assert!(m("host 192.168.1.2", &p) && m("src or dst host 10.0.0.1", &p));
    assert!(!m("src and dst host 10.0.0.1", &p));
    assert!(m(
        "src and dst host 10.0.0.1",
        &Pkt {
            dst: [10, 0, 0, 1],
            ..tcp()
        }
    ));
    assert!(m("dest host 192.168.1.2", &p));
    assert!(m("host != 1.1.1.1", &p) && !m("host != 10.0.0.1", &p));
    assert!(m("src host == 10.0.0.1", &p));
    assert!(m("src net 10/8", &p) && !m("dst net 10/8", &p));
    assert!(m("dst net 192.168.0.0/255.255.0.0", &p));
    assert!(m("dst net 192.168.0.0 mask 255.255.0.0", &p));
    assert!(m("net 192.168.1.0/24", &p) && !m("net 192.168.2.0/24", &p));
    assert!(m("net != 172.16/12", &p));
    assert!(m("10.0.0.1", &p) && m("192.168/16", &p) && !m("172.16/12", &p));
    assert!(m(
        "src host & 255.255.0.0 10.0.0.1",
        &Pkt {
            src: [10, 0, 9, 9],
            ..tcp()
        }
    ));
    assert!(!m(
        "src host & 255.255.0.0 10.0.0.1",
        &Pkt {
            src: [10, 1, 0, 1],
            ..tcp()
        }
    ));
    // AddressInfo names.
    assert!(
        m("dst net lan", &p) && m("dst lan", &p) && !m("src lan", &p),
        "a prefix-only name is a net"
    );
    assert!(m("src INSIDE", &p));
    assert!(m(
        "dst host gw",
        &Pkt {
            dst: [10, 0, 0, 254],
            ..tcp()
        }
    ));
    // Elision: `src host A or B` is `src host A or src host B`.
    assert!(m("src host 1.1.1.1 or 10.0.0.1", &p));
    assert!(!m("src host 1.1.1.1 or 192.168.1.2", &p));
    assert!(m("dst net 10/8 or 192.168/16", &p));
    // `tcp host X` also requires TCP.
    assert!(m("tcp src host 10.0.0.1", &p) && !m("udp src host 10.0.0.1", &p));
}

#[test]
fn ports() {
    let p = tcp(); // 1234 -> 80
    assert!(m("port 80", &p) && m("port 1234", &p) && !m("port 81", &p));
    assert!(m("dst port 80", &p) && !m("src port 80", &p));
    assert!(m("tcp port www", &p) && m("dst tcp port http", &p) && !m("udp port 80", &p));
    assert!(m("udp port domain", &udp()) && m("dst port dns", &udp()));
    assert!(m("www", &p) && m("https or www", &p) && !m("ssh", &p));
    assert!(m("port 443 or 80", &p) && m("dst port 22 or 80", &p) && !m("src port 22 or 80", &p));
    assert!(m("dst port < 1024", &p) && !m("src port < 1024", &p));
    assert!(m("src port > 1023", &p) && m("src port >= 1234", &p) && !m("src port >= 1235", &p));
    assert!(m("port > 1023", &p), "src or dst: either port");
    assert!(!m("port <= 1023", &p), "negated src-or-dst: both ports");
    assert!(m("port <= 1234", &p) && m("port < 1235", &p) && !m("port < 1234", &p));
    assert!(m("src port != 80", &p) && !m("dst port != 80", &p));
    assert!(!m("port != 80", &p) && m("port != 81", &p));
    assert!(m("src and dst port > 50", &p) && !m("src and dst port 80", &p));
    assert!(m("src port & 0xff00 == 0x0400", &p));
    // `port != X` does not match non-TCP/UDP packets; `not port X` does.
    assert!(!m("port != 80", &icmp()) && m("not port 80", &icmp()));
    // Elision keeps the transport protocol and direction.
    assert!(m("tcp dst port 1 or 80", &p) && !m("udp dst port 1 or 80", &p));
    // `tcp and www` means tcp port www.
    assert!(m("tcp and www", &p) && !m("udp and www", &p));
    // Ports only match first fragments.
    let frag = Pkt {
        frag: 0x0010,
        ..tcp()
    };
    assert!(!m("port 80", &frag) && m("tcp", &frag));
    let first = Pkt {
        frag: 0x2000,
        ..tcp()
    };
    assert!(m("port 80", &first));
}

#[test]
fn tcp_flags_and_window() {
    let syn = Pkt {
        flags: 0x02,
        ..tcp()
    };
    let synack = Pkt {
        flags: 0x12,
        ..tcp()
    };
    let finack = Pkt {
        flags: 0x11,
        ..tcp()
    };
    assert!(m("tcp opt syn", &syn) && m("syn", &synack) && !m("syn", &finack));
    assert!(m("syn and not ack", &syn) && !m("syn && !ack", &synack));
    assert!(
        m("fin ack", &finack) && !m("fin ack", &synack),
        "juxtaposition is and"
    );
    assert!(m("rst or fin", &finack));
    assert!(
        m(
            "tcp opt psh",
            &Pkt {
                flags: 0x08,
                ..tcp()
            }
        ) && m(
            "urg",
            &Pkt {
                flags: 0x20,
                ..tcp()
            }
        )
    );
    assert!(m(
        "tcp opt rst",
        &Pkt {
            flags: 0x04,
            ..tcp()
        }
    ));
    assert!(
        !m(
            "syn",
            &Pkt {
                flags: 0x02,
                frag: 0x0001,
                ..tcp()
            }
        ),
        "first fragment only"
    );
    assert!(!m(
        "syn",
        &Pkt {
            proto: IpProtocol::UDP,
            ..tcp()
        }
    ));
    assert!(m("tcp win 8192", &tcp()) && m("tcp win > 100", &tcp()) && !m("tcp win < 100", &tcp()));
    assert!(!m("tcp win != 8192", &tcp()) && !m("tcp win != 1", &udp()));
}

#[test]
fn icmp_types() {
    let echo = icmp();
    let reply = Pkt {
        icmp_type: 0,
        ..icmp()
    };
    assert!(m("icmp type echo", &echo) && !m("icmp type echo", &reply));
    assert!(m("icmp type echo-reply", &reply) && m("icmp type 0", &reply));
    assert!(m("icmp type echo or echo-reply", &reply));
    assert!(m("echo-reply", &reply) && m("unreachable or echo-reply", &reply));
    assert!(
        m("icmp type != 0", &echo) && !m("icmp type != 0", &tcp()),
        "op != does not match non-ICMP"
    );
    assert!(m("not icmp type 0", &tcp()));
    assert!(m("icmp type > 5", &echo) && m("icmp type <= 8", &echo) && !m("icmp type >= 9", &echo));
    assert!(m(
        "icmp type timeexceeded",
        &Pkt {
            icmp_type: 11,
            ..icmp()
        }
    ));
}

#[test]
fn ip_fields() {
    let p = Pkt {
        tos: 0xb9,
        ttl: 10,
        id: 1000,
        ..tcp()
    };
    assert!(m("ip vers 4", &p) && !m("ip vers 6", &p));
    assert!(
        m("ip hl 5", &p)
            && m(
                "ip hl > 5",
                &Pkt {
                    options: 2,
                    ..tcp()
                }
            )
    );
    assert!(m("ip id 1000", &p) && m("ip id >= 1000", &p) && !m("ip id > 1000", &p));
    assert!(m("ip tos 0xb9", &p) && m("ip tos & 0xfc == 0xb8", &p));
    assert!(m("ip dscp 46", &p) && m("ip dscp > 45", &p));
    assert!(m("ip ect", &p) && !m("ip ect", &tcp()));
    assert!(m("ip ce", &Pkt { tos: 3, ..tcp() }) && !m("ip ce", &p));
    assert!(m("ip ect 1", &p) && !m("ip ect 2", &p));
    assert!(m("ip ttl 10", &p) && m("ip ttl == 10", &p) && m("ip ttl = 10", &p));
    assert!(m("ip ttl != 11", &p) && !m("ip ttl != 10", &p));
    assert!(m("ip ttl < 11", &p) && !m("ip ttl < 10", &p));
    assert!(m("ip ttl <= 10", &p) && !m("ip ttl <= 9", &p));
    assert!(m("ip ttl > 9", &p) && !m("ip ttl > 10", &p));
    assert!(m("ip ttl >= 10", &p) && !m("ip ttl >= 11", &p));
    assert!(m("ip ttl 5 or 10", &p), "elision of `ip ttl`");
    assert!(
        m("ip ttl < 300", &p) && !m("ip ttl > 300", &p),
        "comparisons beyond the field range"
    );
    assert!(m("ip len 40", &p) && m("ip len > 39", &p));
    let frag = Pkt {
        frag: 0x2000,
        ..tcp()
    };
    let later = Pkt {
        frag: 0x0003,
        ..tcp()
    };
    let df = Pkt {
        frag: 0x4000,
        ..tcp()
    };
    assert!(m("ip frag", &frag) && m("ip frag", &later) && !m("ip frag", &df));
    assert!(m("ip unfrag", &df) && m("unfrag", &tcp()) && !m("ip unfrag", &later));
}

#[test]
fn data_offsets() {
    let p = Pkt { ttl: 33, ..tcp() };
    assert!(m("ip[8] = 33", &p) && m("ip[8:1] 33", &p) && m("ip[8] > 32", &p));
    assert!(m("ip[12:4] == 0x0a000001", &p));
    assert!(m("ip[12:2] & 0xff00 == 0x0a00", &p));
    assert!(m("ip[8,9] == 0x2106", &p));
    assert!(m("tcp[2:2] == 80", &p) && !m("udp[2:2] == 80", &p));
    assert!(m("transp[2:2] == 80", &p) && m("transp[13] & 2 != 0", &p));
    assert!(
        m(
            "transp[0:2] == 1234",
            &Pkt {
                options: 3,
                ..tcp()
            }
        ),
        "transport offset follows ip hl"
    );
    assert!(
        !m(
            "transp[2:2] == 80",
            &Pkt {
                frag: 0x0001,
                ..tcp()
            }
        ),
        "first fragment only"
    );
    assert!(
        !m("ip[60:4] == 0", &p) && m("not ip[60:4] == 0", &p),
        "short reads are false"
    );
    assert!(!m("ip[60:4] != 0", &p), "whatever the operator");
}

#[test]
fn boolean_structure() {
    let p = tcp();
    assert!(m("true", &p) && !m("false", &p) && m("-", &p) && m("any", &p) && m("all", &p));
    assert!(m("not udp", &p) && m("! udp", &p) && !m("!tcp", &p) && m("not not tcp", &p));
    assert!(
        m("tcp and dst port 80", &p) && m("tcp && dst port 80", &p) && m("tcp dst port 80", &p)
    );
    assert!(m("udp or tcp", &p) && m("udp || tcp", &p) && !m("udp or icmp", &p));
    assert!(m("(udp or tcp) and port 80", &p) && !m("udp or (tcp and port 81)", &p));
    // and binds tighter than or.
    assert!(m("tcp or udp and false", &p) && !m("(tcp or udp) and false", &p));
    // Ternary.
    assert!(m("tcp ? dst port 80 : icmp", &p) && !m("tcp ? dst port 81 : true", &p));
    assert!(m("udp ? false : tcp", &p) && m("tcp ? false : true ? true : false", &icmp()));
    // `not` inside the qualifiers.
    assert!(m("src not host 1.1.1.1", &p));
    assert!(m("(dst port www or dst port ssh) and tcp opt syn", &p));
}

#[test]
fn ether_host() {
    let mut frame = vec![
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00,
    ];
    frame.extend_from_slice(&tcp().ip());
    let mut pkt = Packet::from_bytes(&frame);
    pkt.set_mac_header(0);
    pkt.set_network_header(14);
    let view = View::of(&pkt);
    let n = names();
    let t = |s: &str| parse_pattern(s, &n).unwrap().matches(&view);
    assert!(t("ether host 00:11:22:33:44:55") && t("dst ether host 00:11:22:33:44:55"));
    assert!(t("src ether host 02:00:00:00:00:01") && !t("src ether host 00:11:22:33:44:55"));
    assert!(t("ether host != 00:00:00:00:00:09") && t("00:11:22:33:44:55"));
    assert!(t("ether host 00:11:22:33:44:55 and tcp port 80"));
    // Without a MAC annotation ether tests are false.
    let view = View::from_ip(&frame[14..]);
    assert!(!parse_pattern("ether host 00:11:22:33:44:55", &n)
        .unwrap()
        .matches(&view));
}

#[test]
fn ast_is_lowered_to_field_tests() {
    let n = names();
    let ttl = Test::field(Base::Network, 8, 1, CmpOp::Gt, 10);
    assert_eq!(parse_pattern("ip ttl > 10", &n).unwrap(), Expr::Test(ttl));
    let e = parse_pattern("src tcp port 80", &n).unwrap();
    let Expr::And(parts) = &e else { panic!("{e}") };
    assert_eq!(parts.len(), 3, "protocol, first fragment, port: {e}");
    assert_eq!(
        parts[2],
        Expr::Test(Test::field(Base::Transport, 0, 2, CmpOp::Eq, 80))
    );
    assert_eq!(
        e.to_string(),
        "(ip[9:1] == 6 && ip[6:2] & 0x1fff == 0 && transp[0:2] == 80)"
    );
    assert_eq!(parse_pattern("-", &n).unwrap(), Expr::True);
}

#[test]
fn parse_errors_say_what_was_expected_and_where() {
    assert!(err("").contains("empty"));
    assert!(err("src host").contains("value"), "{}", err("src host"));
    assert!(
        err("host 10/8").contains("expected an IP address"),
        "{}",
        err("host 10/8")
    );
    assert!(err("80").contains("bare number"));
    assert!(err("tcp and").contains("end of the pattern"));
    assert!(err("(tcp").contains("expected `)`"));
    assert!(err("tcp )").contains("column 5"), "{}", err("tcp )"));
    assert!(err("ip ttl 300").contains("out of range"));
    assert!(err("ip ttl & 0x100 == 1").contains("mask out of range"));
    assert!(err("host > 1.2.3.4").contains("operator not supported"));
    assert!(err("tcp opt != syn").contains("not supported"));
    assert!(
        err("udp opt syn").contains("bad protocol") || err("udp opt syn").contains("meaningless")
    );
    assert!(
        err("icmp port 80").contains("bad protocol") || err("icmp port 80").contains("meaningless")
    );
    assert!(err("echo").contains("ambiguous"));
    assert!(err("ip ttl >").contains("value"));
    assert!(err("ip[2:4] = 1").contains("single 4-byte word"));
    assert!(err("ip[0:5] = 1").contains("between 1 and 4"));
    assert!(err("ip[x] = 1").contains("[POS:LEN]"));
    assert!(err("tcp ? syn").contains("`:`"));
    assert!(err("src dst host 1.2.3.4").contains("specified twice"));
    assert!(err("nonsense").contains("column 1"));
    assert!(err("ip frag 1").contains("not supported"));
    assert!(err("ip ttl & 0 == 0").contains("zero mask"));
    assert!(
        err("src host 10.0.0.1 & 255.0.0.0").contains("expected a value"),
        "mask goes before the value"
    );
    let deep = "(".repeat(500) + "tcp" + &")".repeat(500);
    assert!(err(&deep).contains("nested"));
}

fn cfg_err(class: &str, conf: &str, n: &Names) -> String {
    match build(class, conf, &bcx(n, 1)) {
        Ok(_) => panic!("{class}({conf}) accepted"),
        Err(e) => e.message,
    }
}

fn bcx<'a>(names: &'a Names, noutputs: usize) -> BuildCtx<'a> {
    BuildCtx {
        name: "nf/f",
        ninputs: 1,
        noutputs,
        names,
        base_dir: Path::new("."),
    }
}

fn push(e: &mut Box<dyn elements::Element>, p: Packet) -> Result<usize, &'static str> {
    let mut cx = Context::default();
    match e.push(0, p, &mut cx) {
        Verdict::Out(o, _) => Ok(o),
        Verdict::Drop(_, why) => Err(why),
        Verdict::Done => panic!("filters answer directly"),
    }
}

fn ip_packet(p: &Pkt) -> Packet {
    let mut pkt = Packet::from_bytes(&p.ip());
    pkt.set_network_header(0);
    pkt
}

#[test]
fn ipclassifier_element() {
    let n = names();
    let mut e = build("IPClassifier", "tcp dst port 80, udp, -", &bcx(&n, 3)).unwrap();
    assert_eq!(e.class_name(), "IPClassifier");
    assert_eq!(e.port_count(), PortCount::range(1, 1, 3, usize::MAX));
    assert_eq!(push(&mut e, ip_packet(&tcp())), Ok(0));
    assert_eq!(push(&mut e, ip_packet(&udp())), Ok(1));
    assert_eq!(push(&mut e, ip_packet(&icmp())), Ok(2));
    let mut e = build("IPClassifier", "tcp, udp", &bcx(&n, 2)).unwrap();
    assert_eq!(push(&mut e, ip_packet(&icmp())), Err("no-match"));
    // Without a network header annotation, IP tests are false.
    assert_eq!(
        push(&mut e, Packet::from_bytes(&tcp().ip())),
        Err("no-match")
    );
    let mut e = build("IPClassifier", "not tcp", &bcx(&n, 1)).unwrap();
    assert_eq!(push(&mut e, Packet::from_bytes(&tcp().ip())), Ok(0));
    // Errors name the pattern.
    let msg = cfg_err("IPClassifier", "tcp, src host 1.2.3", &n);
    assert!(msg.starts_with("pattern 1:"), "{msg}");
    assert!(build("IPClassifier", "", &bcx(&n, 0)).is_err());
    // An AddressInfo name in upper case at the start of a pattern.
    let mut e = build("IPClassifier", "INSIDE and tcp", &bcx(&n, 1)).unwrap();
    assert_eq!(push(&mut e, ip_packet(&tcp())), Ok(0));
}

#[test]
fn ipfilter_element() {
    let n = names();
    let conf = "deny src host 10.0.0.9, allow tcp dst port 80, 2 udp, drop icmp, 1 ip ttl < 5";
    let mut e = build("IPFilter", conf, &bcx(&n, 3)).unwrap();
    assert_eq!(e.class_name(), "IPFilter");
    assert_eq!(e.port_count(), PortCount::range(1, 1, 3, usize::MAX));
    assert_eq!(
        push(
            &mut e,
            ip_packet(&Pkt {
                src: [10, 0, 0, 9],
                ..tcp()
            })
        ),
        Err("filter-deny")
    );
    assert_eq!(push(&mut e, ip_packet(&tcp())), Ok(0));
    assert_eq!(push(&mut e, ip_packet(&udp())), Ok(2));
    assert_eq!(push(&mut e, ip_packet(&icmp())), Err("filter-deny"));
    assert_eq!(
        push(
            &mut e,
            ip_packet(&Pkt {
                proto: 47,
                ttl: 3,
                ..tcp()
            })
        ),
        Ok(1)
    );
    assert_eq!(
        push(&mut e, ip_packet(&Pkt { proto: 47, ..tcp() })),
        Err("filter-deny"),
        "no rule matched"
    );
    let f = e.as_any().downcast_ref::<IPFilter>().unwrap();
    assert_eq!(f.rules().len(), 5);
    assert_eq!(f.rules()[0].0, FilterAction::Drop);
    assert_eq!(f.rules()[2].0, FilterAction::Output(2));

    let mut e = build("IPFilter", "deny tcp, allow all", &bcx(&n, 1)).unwrap();
    assert_eq!(e.port_count(), PortCount::range(1, 1, 1, usize::MAX));
    assert_eq!(push(&mut e, ip_packet(&tcp())), Err("filter-deny"));
    assert_eq!(push(&mut e, ip_packet(&udp())), Ok(0));
    let mut e = build("IPFilter", "allow", &bcx(&n, 1)).unwrap();
    assert_eq!(push(&mut e, ip_packet(&udp())), Ok(0));
    let mut e = build("IPFilter", "drop -", &bcx(&n, 1)).unwrap();
    assert_eq!(
        e.port_count(),
        PortCount::range(1, 1, 1, usize::MAX),
        "at least one output"
    );
    assert_eq!(push(&mut e, ip_packet(&udp())), Err("filter-deny"));

    let msg = cfg_err("IPFilter", "allow tcp, accept udp", &n);
    assert!(
        msg.contains("rule 1") && msg.contains("expected an action"),
        "{msg}"
    );
    let msg = cfg_err("IPFilter", "allow tcp port", &n);
    assert!(msg.contains("rule 0"), "{msg}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parser_never_panics_on_arbitrary_text(s in ".{0,80}") {
        let _ = parse_pattern(&s, &names());
    }

    #[test]
    fn parser_never_panics_on_pattern_like_text(
        words in proptest::collection::vec(
            proptest::sample::select(vec![
                "src", "dst", "host", "net", "port", "tcp", "udp", "icmp", "ip", "proto", "opt",
                "syn", "ack", "ttl", "tos", "dscp", "ect", "ce", "frag", "unfrag", "vers", "hl",
                "id", "len", "win", "type", "echo", "www", "and", "or", "not", "!", "(", ")",
                "[", "]", "0:2", "9", "&", "==", "!=", "<", ">", "<=", ">=", "?", ":", "80",
                "10.0.0.1", "10/8", "mask", "255.0.0.0", "ether", "00:11:22:33:44:55", "true",
                "false", "-", "transp", "lan", "0xffffffff", "99999999999", "&&", "||",
            ]),
            0..12,
        ),
        ip in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let text = words.join(" ");
        if let Ok(e) = parse_pattern(&text, &names()) {
            let _ = e.matches(&View::from_ip(&ip));
            let _ = e.to_string();
        }
    }
}
