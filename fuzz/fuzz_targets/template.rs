//! Fuzz target: `volley::fuzzing::template` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| volley::fuzzing::template(data));
