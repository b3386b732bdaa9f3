// A filter's UDF sees the packet read-only: it cannot take a writable header view.
use operators::{pipe, Ethernet, Ipv4, Raw};

fn main() {
    let _nf = pipe::<(Ipv4, (Ethernet, Raw)), ()>().filter("ttl", |p| {
        p.header_mut().set_ttl(0);
        true
    });
}
