//! `TTLNF`: NetBricks' first NF (Listing 1): parse Ethernet and IPv4, decrement the TTL,
//! drop the packet when it runs out.
//!
//! ```text
//! TTLNF()
//! ```
//!
//! Behaves as `examples/ttl/ttl.click` (`Classifier(12/0800) -> MarkIPHeader(14) ->
//! DecIPTTL`) does on well-formed frames: a packet whose TTL is 1 or 0 is dropped under
//! `ttl-expired` (DecIPTTL's reason), any other has its TTL decremented and its header
//! checksum updated incrementally (RFC 1624, as Click's `decipttl.cc`), so the bytes out are
//! the same. NetBricks' listing decrements first and filters on 0; filtering on `> 1` first
//! drops the same packets and leaves a dropped packet as it came.
//!
//! Drops: `parse-ethernet` (under 14 bytes), `parse-ipv4` (not EtherType 0x0800, or not an
//! IPv4 header: version, header length, total length), `ttl-expired`. In `ttl.click` the
//! first two are the `Classifier`'s second output going to `Discard` (`discard`).

use elements::registry::{Doc, ElementClass};
use elements::{Args, BuildCtx, ConfigError, Element};
use operators::nf::{class, Leave};
use operators::{pipe, Ethernet, Ipv4, OperatorNf, Pkt, Raw, Stage};
use wire::checksum::ttl_decremented;

/// The class name.
pub const NAME: &str = "TTLNF";

/// The NF's pipeline.
pub fn pipeline() -> impl Stage<Pkt<Raw>, Out = impl Leave> + 'static {
    pipe::<Raw, ()>()
        .parse::<Ethernet>()
        .parse::<Ipv4>()
        .filter("ttl-expired", |p| p.header().ttl() > 1)
        .transform(|p| {
            let mut ip = p.header_mut();
            let ttl = ip.ttl();
            ip.set_ttl(ttl - 1);
            ip.set_checksum(ttl_decremented(ip.checksum()));
        })
        .into_stage()
}

/// Builds the NF (no arguments).
fn build(
    name: &'static str,
    args: &Args,
    _: &BuildCtx<'_>,
) -> Result<Box<dyn Element>, ConfigError> {
    args.check(0, &[])
        .map_err(|e| ConfigError::new(format!("{name}: {}", e.message)))?;
    Ok(Box::new(
        OperatorNf::<_, ()>::new(name, 1, pipeline()).stateless(),
    ))
}

/// The registry entry.
pub const CLASS: ElementClass = class(
    NAME,
    build,
    Doc::new(
        "",
        "NetBricks' TTL NF written with operators (examples/bricks): parse Ethernet and IPv4, \
         drop packets whose TTL is 1 or less, decrement the TTL of the others (checksum \
         updated incrementally, as DecIPTTL).",
        "",
    )
    .drops(&[&["parse-ethernet", "parse-ipv4", "ttl-expired"]]),
);

#[cfg(test)]
mod tests {
    use crate::testutil::{build, push};
    use elements::Verdict;
    use wire::build::Frame;

    #[test]
    fn decrements_like_dec_ip_ttl_and_drops_at_one() {
        let mut nf = build("TTLNF", "", 1);
        let mut click = elements::build(
            "DecIPTTL",
            "",
            &elements::BuildCtx {
                name: "c",
                ninputs: 1,
                noutputs: 1,
                names: &elements::Names::default(),
                base_dir: std::path::Path::new("."),
            },
        )
        .unwrap();
        for ttl in [0u8, 1, 2, 64, 255] {
            let mut f = Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2)
                .ttl(ttl)
                .build();
            // A wrong checksum is updated, not fixed, as DecIPTTL does.
            f[24] ^= 0x5a;
            let mut p = packet::Packet::from_bytes(&f);
            p.set_network_header(14);
            let want = click.push(0, p, &mut elements::Context::default());
            match (push(&mut *nf, 0, &f, 0), want) {
                (Verdict::Out(0, a), Verdict::Out(0, b)) => assert_eq!(a.data(), b.data()),
                (Verdict::Drop(_, a), Verdict::Drop(_, b)) => {
                    assert_eq!((a, b), ("ttl-expired", "ttl-expired"))
                }
                (a, b) => panic!("ttl {ttl}: {a:?} vs {b:?}"),
            }
        }
        match push(&mut *nf, 0, &[0u8; 13], 0) {
            Verdict::Drop(_, r) => assert_eq!(r, "parse-ethernet"),
            v => panic!("{v:?}"),
        }
        let mut arp = Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2).build();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        match push(&mut *nf, 0, &arp, 0) {
            Verdict::Drop(_, r) => assert_eq!(r, "parse-ipv4"),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn takes_no_arguments() {
        let e = crate::testutil::build_in("TTLNF", "3", 1, std::path::Path::new(".")).err();
        assert!(e.is_some_and(|e| e.message.starts_with("TTLNF: ")));
    }
}
