// Sending a packet moves it: the NF that sent it can no longer write it.
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
    let mut cx = Cx::default();
    cx.send(0, pkt);
    pkt.payload_mut()[0] = 0xff;
}
