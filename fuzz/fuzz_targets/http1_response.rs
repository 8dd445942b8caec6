//! Fuzz target: `volley::fuzzing::http1_responses` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| volley::fuzzing::http1_responses(data));
