//! Fuzz target: `volley::fuzzing::cli_criteria` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| volley::fuzzing::cli_criteria(data));
