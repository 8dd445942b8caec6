//! Fuzz target: `volley::fuzzing::qpack_section` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| volley::fuzzing::qpack_section(data));
