//! Fuzz target `pcap`: [`fuzzing::pcap`] on every input (see docs/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzzing::pcap(data));
