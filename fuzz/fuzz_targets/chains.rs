//! Fuzz target `chains`: [`fuzzing::chains`] on every input (see docs/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::chains(data));
