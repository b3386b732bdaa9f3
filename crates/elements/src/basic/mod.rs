//! Click's basic elements: devices and dump files, sinks and counters, queues (pass-through
//! in FuseBox's run-to-completion model), tees, paint annotations, header stripping, Ethernet
//! encapsulation, switches, and the declarative elements that never see a packet.
//!
//! One element (or a small family of synonyms) per file; each file documents the Click
//! behaviour it follows, its arguments, and carries its unit tests.

use crate::{Args, ConfigError};

mod checkpaint;
mod counter;
mod declarative;
mod device;
mod discard;
mod etherencap;
pub(crate) mod etherrewrite;
mod hashswitch;
mod null;
mod paint;
mod paintswitch;
mod painttee;
mod print;
mod queue;
mod roundrobinswitch;
mod storeetheraddress;
mod strip;
mod switch;
mod tee;
mod unstrip;

pub use checkpaint::{CheckPaint, CheckPaintReason};
pub use counter::Counter;
pub use declarative::Declarative;
pub use device::{FromDevice, FromDump, FromDumpReason, ToDevice, ToDump};
pub use discard::{Discard, DiscardReason, Idle, IdleReason};
pub use etherencap::EtherEncap;
pub use etherrewrite::EtherRewrite;
pub use hashswitch::HashSwitch;
pub use null::Null;
pub use paint::Paint;
pub use paintswitch::PaintSwitch;
pub use painttee::PaintTee;
pub use print::Print;
pub use queue::{Queue, Unqueue};
pub use roundrobinswitch::RoundRobinSwitch;
pub use storeetheraddress::StoreEtherAddress;
pub use strip::Strip;
pub use switch::{StaticSwitch, Switch};
pub use tee::Tee;
pub use unstrip::Unstrip;

/// Click's `AnnoArg` for the paint elements: only the paint annotation itself is modelled, so
/// `ANNO` is accepted when it names it (`PAINT`), and refused otherwise.
fn check_paint_anno(args: &Args, pos: usize) -> Result<(), ConfigError> {
    match args.get(pos, "ANNO") {
        None => Ok(()),
        Some(a) if a.trim() == "PAINT" => Ok(()),
        Some(a) => Err(ConfigError::new(format!(
            "expected ANNO `PAINT` (the only annotation FuseBox models for paint), found `{a}`"
        ))),
    }
}

/// Parses a paint color (0-255).
fn parse_color(s: &str) -> Result<u8, ConfigError> {
    crate::args::parse_uint_max(s, 255, "COLOR").map(|v| v as u8)
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Helpers for the unit tests of this family.
    use crate::{BuildCtx, ConfigError, Context, Element, Names, Verdict};
    use packet::Packet;
    use std::path::Path;

    /// Builds `class(config)` with `noutputs` connected outputs.
    pub fn make(
        class: &str,
        config: &str,
        noutputs: usize,
    ) -> Result<Box<dyn Element>, ConfigError> {
        let names = Names::new();
        let bcx = BuildCtx {
            name: "nf/e",
            ninputs: 1,
            noutputs,
            names: &names,
            base_dir: Path::new("/cases/x"),
        };
        crate::build(class, config, &bcx)
    }

    /// Builds, panicking on a configuration error (tests only).
    pub fn ok(class: &str, config: &str, noutputs: usize) -> Box<dyn Element> {
        match make(class, config, noutputs) {
            Ok(e) => e,
            Err(err) => panic!("{class}({config}) refused: {err}"),
        }
    }

    /// The error message of a configuration that must be refused.
    pub fn err(class: &str, config: &str, noutputs: usize) -> String {
        match make(class, config, noutputs) {
            Ok(_) => panic!("{class}({config}) accepted"),
            Err(e) => e.message,
        }
    }

    /// What came out of one push: (port, bytes) in emission order, drop reasons, packets created.
    #[derive(Debug, Default)]
    pub struct Outcome {
        pub out: Vec<(usize, Packet)>,
        pub drops: Vec<&'static str>,
        pub created: u64,
    }

    impl Outcome {
        /// (port, data) pairs.
        pub fn ports(&self) -> Vec<usize> {
            self.out.iter().map(|(p, _)| *p).collect()
        }
    }

    /// Pushes `packet` on input 0 and collects everything that came out.
    pub fn run(e: &mut dyn Element, packet: Packet) -> Outcome {
        let mut cx = Context::default();
        let mut o = Outcome::default();
        match e.push(0, packet, &mut cx) {
            Verdict::Out(port, p) => o.out.push((port, p)),
            Verdict::Drop(_, r) => o.drops.push(r),
            Verdict::Done => {}
        }
        o.out.extend(cx.take_emitted());
        o.drops.extend(cx.take_dropped().map(|(_, r)| r));
        o.created = cx.take_created();
        o
    }

    /// A packet holding `data`.
    pub fn pkt(data: &[u8]) -> Packet {
        Packet::from_bytes(data)
    }

    /// A 60-byte Ethernet/IPv4/UDP-ish frame: dst 02:..:01, src 02:..:02, type 0x0800.
    pub fn frame() -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[12] = 0x08;
        f[14] = 0x45;
        for (i, b) in f.iter_mut().enumerate().skip(15) {
            *b = i as u8;
        }
        f
    }
}
