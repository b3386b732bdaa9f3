// An NF that must keep bytes after sending copies them first: the copy is its own, the
// packet is gone. Header fields read before the send are plain values.
use operators::{Cx, Ethernet, Ipv4, Pkt, Raw};
use packet::Packet;

fn ipv4_packet() -> Pkt<(Ipv4, (Ethernet, Raw))> {
    let frame = wire::build::Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 53).build();
    let pkt = Pkt::new(Packet::from_bytes(&frame));
    pkt.parse::<Ethernet>()
        .ok()
        .and_then(|p| p.parse::<Ipv4>().ok())
        .unwrap()
}

use operators::{pipe, Stage};

fn main() {
    let pkt = ipv4_packet();
    let kept: Vec<u8> = pkt.payload().to_vec();
    let ttl = pkt.header().ttl();
    let mut cx = Cx::default();
    cx.send(0, pkt);
    assert_eq!(ttl, 64);
    assert_eq!(kept.len(), 8);
    let sent: Vec<_> = cx.take_sent().collect();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].1.data()[14 + 20..], kept[..]);

    // The same inside an NF: its state keeps copies of what it sent.
    let mut copies: Vec<Vec<u8>> = Vec::new();
    {
        let mut nf = pipe::<(Ipv4, (Ethernet, Raw)), ()>()
            .transform(|p| copies.push(p.payload().to_vec()))
            .send(3)
            .into_stage();
        assert!(nf.run(ipv4_packet(), &mut cx).is_none());
    }
    assert_eq!(copies, [kept.clone()]);
    assert_eq!(
        cx.take_sent().map(|(port, _)| port).collect::<Vec<_>>(),
        [3]
    );

    // And across workers: the packet moves to the other thread, the copy stays here.
    let (tx, rx) = std::sync::mpsc::channel::<Pkt<(Ipv4, (Ethernet, Raw))>>();
    let worker = std::thread::spawn(move || {
        rx.recv().map(|mut p| {
            p.header_mut().set_ttl(9);
            p.header().ttl()
        })
    });
    let pkt = ipv4_packet();
    let copy = pkt.payload().to_vec();
    tx.send(pkt).unwrap();
    assert_eq!(worker.join().unwrap(), Ok(9));
    assert_eq!(copy, kept);
}
