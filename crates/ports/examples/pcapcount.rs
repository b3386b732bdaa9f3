fn main() {
    for a in std::env::args().skip(1) {
        let p = std::path::Path::new(&a);
        match ports::pcap::PcapReader::open(p) {
            Err(e) => println!("{a}\t0\tERR {e}"),
            Ok(mut r) => {
                let mut n = 0;
                let mut err = String::new();
                while let Some(x) = r.next_record() {
                    match x { Ok(_) => n += 1, Err(e) => err = format!("ERR {e}") }
                }
                println!("{a}\t{n}\t{err}");
            }
        }
    }
}
