//! Replays the fuzz targets' committed inputs (fuzz/seeds and, for every
//! input that once failed, fuzz/regressions) through the same entry points
//! the targets call, so `cargo test` catches a regression without the
//! nightly toolchain or cargo-fuzz.

use std::path::Path;

type Entry = fn(&[u8]);

const TARGETS: &[(&str, Entry)] = &[
    ("http1_response", volley::fuzzing::http1_responses),
    ("http2_connection", volley::fuzzing::http2_server_bytes),
    ("hpack", volley::fuzzing::hpack_blocks),
    ("http3_stream", volley::fuzzing::http3_stream),
    ("qpack", volley::fuzzing::qpack_section),
    ("plan_file", volley::fuzzing::plan_file),
    ("template", volley::fuzzing::template),
    ("cli_criteria", volley::fuzzing::cli_criteria),
];

/// Runs `entry` on every file under `fuzz/KIND/TARGET`; returns how many.
fn replay(kind: &str, target: &str, entry: Entry) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(kind)
        .join(target);
    let Ok(files) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut count = 0;
    for file in files {
        let path = file.unwrap().path();
        entry(&std::fs::read(&path).unwrap());
        count += 1;
    }
    count
}

#[test]
fn fuzz_seeds_and_regressions_replay_cleanly() {
    for (target, entry) in TARGETS {
        let seeds = replay("seeds", target, *entry);
        assert!(seeds > 0, "fuzz/seeds/{target} holds no seed");
        replay("regressions", target, *entry);
    }
}
