// Handing a packet to another NF (here a pipeline's stage) moves it: the NF that handed it
// on can no longer read it.
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
    let mut next = pipe::<(Ipv4, (Ethernet, Raw)), ()>()
        .transform(|p| p.header_mut().set_ttl(1))
        .into_stage();
    let pkt = ipv4_packet();
    let mut cx = Cx::default();
    let _ = next.run(pkt, &mut cx);
    let _ = pkt.header().ttl();
}
