// A writable header view borrows its packet: the NF cannot write the packet after
// sending it through a view taken before.
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

fn main() {
    let mut pkt = ipv4_packet();
    let mut ip = pkt.header_mut();
    let mut cx = Cx::default();
    cx.send(0, pkt);
    ip.set_ttl(1);
}
