//! Fuzz target `wire`: [`fuzzing::wire`] on every input (see docs/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::wire(data));
