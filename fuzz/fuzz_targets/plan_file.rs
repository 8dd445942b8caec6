//! Fuzz target: `volley::fuzzing::plan_file` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| volley::fuzzing::plan_file(data));
