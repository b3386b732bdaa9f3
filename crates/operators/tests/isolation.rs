//! Zero-copy isolation, checked by the compiler (NetBricks' ZCSI): every program under
//! `tests/ui/` must fail to compile with the error in its `.stderr` file, and the programs
//! under `tests/ui/pass/` must compile and run.
//!
//! * a packet sent (`Cx::send`), handed to another NF or moved to another worker cannot be
//!   read or written by its sender afterwards (E0382, use of a moved value);
//! * a header view borrows its packet, so it cannot be kept across a send, a `shuffle` (the
//!   operator that moves the packet to another worker), a move into a channel to another
//!   worker, or in the NF's state (E0505, E0597, E0521);
//! * a view taken through `&Pkt` (`header()`, a filter's UDF) has no setters (E0599,
//!   E0596); a `Pkt` is not `Clone` (E0599);
//! * an NF keeps bytes past a send by copying them first (`pass/copy_payload_then_send.rs`).
//!
//! The expected messages are rustc's; after a toolchain change that rewords them, check the
//! new ones still name the intended error and regenerate with `TRYBUILD=overwrite`.

#[test]
fn isolation_is_checked_by_the_compiler() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
