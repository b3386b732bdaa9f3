//! Fuzz target `classbench`: [`fuzzing::classbench`] on every input (see docs/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::classbench(data));
