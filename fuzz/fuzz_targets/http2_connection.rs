//! Fuzz target: `volley::fuzzing::http2_server_bytes` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| volley::fuzzing::http2_server_bytes(data));
