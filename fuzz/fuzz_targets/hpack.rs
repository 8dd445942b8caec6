//! Fuzz target: `volley::fuzzing::hpack_blocks` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| volley::fuzzing::hpack_blocks(data));
