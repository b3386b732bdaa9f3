//! Building and running the NFs in unit tests.

use elements::{BuildCtx, Context, Element, Names, Verdict};
use packet::Packet;

/// Builds `class(config)` by name (after registering every class) with `n` inputs and
/// outputs, files relative to `dir`.
pub fn build_in(
    class: &str,
    config: &str,
    n: usize,
    dir: &std::path::Path,
) -> Result<Box<dyn Element>, elements::ConfigError> {
    crate::register().expect("the classes register");
    let names = Names::default();
    let bcx = BuildCtx {
        name: "nf/x",
        ninputs: n,
        noutputs: n,
        names: &names,
        base_dir: dir,
    };
    elements::build(class, config, &bcx)
}

/// Builds, panicking on a configuration error.
pub fn build(class: &str, config: &str, n: usize) -> Box<dyn Element> {
    build_in(class, config, n, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"))
}

/// Pushes `frame` into input `port` at virtual time `now`.
pub fn push(e: &mut dyn Element, port: usize, frame: &[u8], now: u64) -> Verdict {
    let mut cx = Context::new(packet::Timestamp(now));
    e.push(port, Packet::from_bytes(frame), &mut cx)
}
