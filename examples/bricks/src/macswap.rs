//! `MacSwapNF`: swaps the Ethernet source and destination addresses (NetBricks' MAC swap,
//! the NF its chaining experiments repeat), so a frame goes back where it came from.
//!
//! ```text
//! MacSwapNF()
//! ```
//!
//! Drops: `parse-ethernet` (frames under 14 bytes).

use elements::model::Field;
use elements::record::Declared;
use elements::registry::{Doc, ElementClass};
use elements::{Args, BuildCtx, ConfigError, Element};
use operators::nf::{class, Leave};
use operators::{pipe, Ethernet, OperatorNf, Pkt, Raw, Stage};

/// The class name.
pub const NAME: &str = "MacSwapNF";

/// The NF's pipeline.
pub fn pipeline() -> impl Stage<Pkt<Raw>, Out = impl Leave> + 'static {
    pipe::<Raw, ()>()
        .parse::<Ethernet>()
        .transform(|p| {
            let mut eth = p.header_mut();
            let (src, dst) = (eth.src_addr(), eth.dst_addr());
            eth.set_src_addr(dst);
            eth.set_dst_addr(src);
        })
        .into_stage()
}

/// What the NF declares for the planner: it reads and writes the two addresses; a frame too
/// short for an Ethernet header is dropped.
pub fn declared() -> Declared {
    Declared {
        sets_headers: true,
        reads: vec![Field::FrameLen, Field::EthDst, Field::EthSrc],
        writes: vec![Field::EthDst, Field::EthSrc],
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
            .with_declared(declared()),
    ))
}

/// The registry entry.
pub const CLASS: ElementClass = class(
    NAME,
    build,
    Doc::new(
        "",
        "MAC swap written with operators (examples/bricks): exchange the Ethernet source and \
         destination addresses.",
        "",
    )
    .drops(&[&["parse-ethernet"]]),
);

#[cfg(test)]
mod tests {
    use crate::testutil::{build, push};
    use elements::Verdict;

    #[test]
    fn swaps_the_addresses() {
        let mut nf = build("MacSwapNF", "", 1);
        let mut f = wire::build::Frame::udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2).build();
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        match push(&mut *nf, 0, &f, 0) {
            Verdict::Out(0, p) => {
                assert_eq!(p.data()[..6], f[6..12]);
                assert_eq!(p.data()[6..12], f[..6]);
                assert_eq!(p.data()[12..], f[12..]);
            }
            v => panic!("{v:?}"),
        }
        assert!(matches!(
            push(&mut *nf, 0, &f[..10], 0),
            Verdict::Drop(_, "parse-ethernet")
        ));
    }
}
