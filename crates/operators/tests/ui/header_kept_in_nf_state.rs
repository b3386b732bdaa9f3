// An NF cannot keep a packet's header view in its state past the packet's turn.
use operators::{pipe, Ethernet, Ipv4, Raw};

fn main() {
    let mut last = None;
    let _nf = pipe::<(Ipv4, (Ethernet, Raw)), ()>().transform(|p| last = Some(p.header()));
}
