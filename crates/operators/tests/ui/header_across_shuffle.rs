// Handing a packet to a shuffle (which moves it to the worker its key picks) while a header
// view of it is kept: refused, the view borrows the packet.
use operators::runtime::{by_flow, Worker};
use operators::{pipe, Cx, Ethernet, Ipv4, Pkt, Raw, Stage};
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
    let mut worker = Worker::alone();
    let mut nf = pipe::<(Ipv4, (Ethernet, Raw)), ()>()
        .shuffle(&mut worker, by_flow(), |_, rest| rest)
        .into_stage();
    let mut cx = Cx::default();
    let pkt = ipv4_packet();
    let ip = pkt.header();
    let _ = nf.run(pkt, &mut cx);
    let _ = ip.ttl();
}
