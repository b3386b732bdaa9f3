// Moving a packet to another worker (through a channel) while a header view of it is
// kept: refused, the view borrows the packet.
use operators::{Ethernet, Ipv4, Pkt, Raw};
use packet::Packet;

fn ipv4_packet() -> Pkt<(Ipv4, (Ethernet, Raw))> {
    let frame = wire::build::Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 53).build();
    let pkt = Pkt::new(Packet::from_bytes(&frame));
    pkt.parse::<Ethernet>()
        .ok()
        .and_then(|p| p.parse::<Ipv4>().ok())
        .unwrap()
}

fn main() {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || rx.recv().map(|p: Pkt<_>| p.len()));
    let pkt = ipv4_packet();
    let ip = pkt.header();
    tx.send(pkt).unwrap();
    let _ = ip.ttl();
    let _ = worker.join();
}
