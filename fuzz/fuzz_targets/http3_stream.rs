//! Fuzz target: `volley::fuzzing::http3_stream` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| volley::fuzzing::http3_stream(data));
