// A header view cannot go to another worker on its own: it borrows a packet the worker
// does not own.
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

/// Runs `work` on another worker thread (what a shuffle does with the rest of a packet's
/// processing): it may only take what it owns.
fn on_another_worker<F: FnOnce() -> u8 + Send + 'static>(work: F) -> std::thread::JoinHandle<u8> {
    std::thread::spawn(work)
}

fn main() {
    let pkt = ipv4_packet();
    let ip = pkt.header();
    let worker = on_another_worker(move || ip.ttl());
    let _ = worker.join();
}
