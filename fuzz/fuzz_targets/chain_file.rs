//! Fuzz target `chain_file`: [`fuzzing::chain_file`] on every input (see docs/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::chain_file(data));
