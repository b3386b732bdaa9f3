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
//!
//! A packet that leaves has its MAC, network and transport header annotations at the
//! Ethernet header, the IPv4 header and after it, as `MarkIPHeader(14)` leaves them in
//! `ttl.click`, so Click elements after the NF find the headers.
//!
//! **A declared model** ([`model`], `OperatorNf::with_model`): the NF says what it does in
//! the vocabulary of `elements::model` (the cases of `DecIPTTL`'s model after the parse
//! checks), so synthesis folds it into traffic classes and the fast path consolidates it
//! instead of running it as an opaque element. Frames of 14 bytes or less and IPv4 headers
//! whose lengths are not consistent are left to the NF itself (`Outcome::Runtime`), and
//! [`declared`] says what it may do with them, for the planner. The
//! model is checked against the pipeline packet by packet (this module's tests) and in every
//! mode by the differential tests.

use elements::model::{Case, Effect, Field, FieldSet, Filter, IpAnchor, Model, Outcome};
use elements::record::Declared;
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
            // The transport header annotation after the IPv4 header, as MarkIPHeader sets it.
            let hl = ip.header_len() as u32;
            let anno = p.anno_mut();
            anno.transport_offset = anno.network_offset + hl;
        })
        .into_stage()
}

/// What the pipeline does, as cases over header fields (IPv4 fields read at byte 14).
pub fn model() -> Model {
    let any = Filter::any;
    let parse_ipv4 = || Outcome::Drop("parse-ipv4");
    let cases = vec![
        // 14 bytes or less: no Ethernet header (parse-ethernet) or nothing after it.
        Case::new(
            any().with(Field::IpAvail, FieldSet::single(0)),
            Outcome::Runtime,
        ),
        Case::new(
            any().with(
                Field::EtherType,
                FieldSet::from_intervals([(0, 0x07ff), (0x0801, 0xffff)]),
            ),
            parse_ipv4(),
        ),
        Case::new(
            any().with(Field::IpAvail, FieldSet::range(1, 19)),
            parse_ipv4(),
        ),
        Case::new(
            any().with(
                Field::IpVersion,
                FieldSet::from_intervals([(0, 3), (5, 15)]),
            ),
            parse_ipv4(),
        ),
        Case::new(
            any().with(Field::IpIhl, FieldSet::range(0, 4)),
            parse_ipv4(),
        ),
        // Lengths the parse may or may not accept (header or total length beyond the data).
        Case::new(
            any().with(Field::IpLenOk, FieldSet::single(0)),
            Outcome::Runtime,
        ),
        Case::new(
            any().with(Field::IpTtl, FieldSet::range(0, 1)),
            Outcome::Drop("ttl-expired"),
        ),
        Case::new(any(), Outcome::Out(0))
            .effect(Effect::MarkMac)
            .effect(Effect::MarkIp)
            .effect(Effect::DecTtl),
    ];
    Model {
        ip_at: IpAnchor::Data(14),
        cases,
    }
}

/// What the NF declares for its run-time cases (frames of 14 bytes or less, IPv4 lengths the
/// parse may or may not accept), for the planner: the parse reads the EtherType and the
/// header's version and lengths, the filter the TTL; a packet that passes has its TTL
/// decremented, its checksum updated and its header annotations set (IPv4 at byte 14); any
/// may be dropped; nothing is kept.
pub fn declared() -> Declared {
    Declared {
        ip_at: IpAnchor::Data(14),
        reads: vec![
            Field::EtherType,
            Field::FrameLen,
            Field::IpAvail,
            Field::IpVersion,
            Field::IpIhl,
            Field::IpLen,
            Field::IpLenOk,
            Field::IpTtl,
        ],
        writes: vec![Field::IpTtl],
        ip_checksum: true,
        sets_headers: true,
        drops: true,
        ..Declared::default()
    }
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
        OperatorNf::<_, ()>::new(name, 1, pipeline())
            .stateless()
            .with_model(model)
            .with_declared(declared()),
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

    /// The model agrees with the pipeline on every packet it does not leave to the NF:
    /// outcome, bytes and header annotations.
    #[test]
    fn the_model_is_what_the_pipeline_does() {
        let mut nf = build("TTLNF", "", 1);
        let model = nf.model().expect("TTLNF declares a model");
        let cfg = ports::gen::GenConfig {
            packets: 4000,
            flows: 50,
            mix: ports::gen::Mix {
                tcp: 2,
                udp: 2,
                icmp: 1,
            },
            anomalies: ports::gen::Anomalies {
                ttl_range: Some((0, 3)),
                bad_ip_checksum: ports::gen::Rate(50_000),
                ip_options: ports::gen::Rate(50_000),
                arp: ports::gen::Rate(50_000),
                truncated: ports::gen::Rate(50_000),
                short_transport: ports::gen::Rate(50_000),
            },
            ..Default::default()
        };
        let mut frames: Vec<Vec<u8>> = ports::gen::generate(&cfg).map(|(_, f)| f).collect();
        // Headers the generator does not make: other versions and header lengths, short
        // and empty frames, total lengths below the header.
        let base = Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2)
            .ttl(9)
            .build();
        for (at, v) in [(14, 0x65), (14, 0x44), (14, 0x4f), (17, 10), (16, 0xff)] {
            let mut f = base.clone();
            f[at] = v;
            frames.push(f);
        }
        for n in [0, 5, 13, 14, 15, 20, 33, 34] {
            frames.push(base[..n].to_vec());
        }
        let (mut modelled, mut runtime) = (0, 0);
        for f in &frames {
            let mut p = packet::Packet::from_bytes(f);
            p.set_transport_header(3); // stale annotations the NF must overwrite
            let applied = elements::model::apply(&model, p);
            let mut q = packet::Packet::from_bytes(f);
            q.set_transport_header(3);
            let mut cx = elements::Context::default();
            let got = nf.push(0, q, &mut cx);
            match (&applied.outcome, got) {
                (elements::model::Outcome::Runtime, _) => runtime += 1,
                (elements::model::Outcome::Out(0), Verdict::Out(0, q)) => {
                    let p = &applied.packet;
                    assert_eq!(p.data(), q.data());
                    assert_eq!(
                        (
                            p.meta.mac_offset,
                            p.meta.network_offset,
                            p.meta.transport_offset
                        ),
                        (
                            q.meta.mac_offset,
                            q.meta.network_offset,
                            q.meta.transport_offset
                        )
                    );
                    modelled += 1;
                }
                (elements::model::Outcome::Drop(a), Verdict::Drop(_, b)) => {
                    assert_eq!(*a, b);
                    modelled += 1;
                }
                (a, b) => panic!("{f:02x?}: model {a:?}, NF {b:?}"),
            }
        }
        assert!(modelled > 3500 && runtime > 0, "{modelled} {runtime}");
    }

    #[test]
    fn takes_no_arguments() {
        let e = crate::testutil::build_in("TTLNF", "3", 1, std::path::Path::new(".")).err();
        assert!(e.is_some_and(|e| e.message.starts_with("TTLNF: ")));
    }
}
