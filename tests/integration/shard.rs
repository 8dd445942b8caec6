//! Sharded runs (`--shard I/N`, `--start-at`) and `volley merge`: shards
//! started as separate processes against one embedded target add up to the
//! unsharded run, and the merge refuses what does not belong together.

use crate::support::{num, read_report, schema_violations, stderr, stdout, target, timed, url, volley};
use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Starts one volley process per shard with the same flags, waits for all
/// (each bounded by its -n or -d), and returns their report paths.
pub(super) fn run_shards(dir: &Path, count: u32, args: &[&str]) -> Vec<PathBuf> {
    let mut children = Vec::new();
    let mut paths = Vec::new();
    for index in 0..count {
        let path = dir.join(format!("shard-{index}.json"));
        let shard = format!("{index}/{count}");
        let child = Command::new(env!("CARGO_BIN_EXE_volley"))
            .args(args)
            .args(["--shard", &shard, "-q", "-o", path.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("volley starts");
        children.push(child);
        paths.push(path);
    }
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a shard failed: {}", stderr(&out));
    }
    paths
}

pub(super) fn merge(paths: &[PathBuf], extra: &[&str]) -> std::process::Output {
    let mut args: Vec<&str> = vec!["merge"];
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    args.extend(extra);
    volley(&args)
}

/// Decodes a report's histogram here, independently of volley's code.
fn decode(text: &Value) -> Histogram<u64> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.as_str().unwrap())
        .unwrap();
    Deserializer::new().deserialize(&mut bytes.as_slice()).unwrap()
}

#[test]
fn three_shards_of_n_add_up_to_the_union_of_their_histograms() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let target_url = url(&server, "/hi");
    let paths = {
        let _quiet = timed();
        run_shards(
            dir.path(),
            3,
            &[
                "run",
                &target_url,
                "-n",
                "30000",
                "-c",
                "6",
                "-t",
                "1",
                "--start-at",
                "+2s",
            ],
        )
    };
    let shards: Vec<Value> = paths.iter().map(|p| read_report(p)).collect();
    for (i, shard) in shards.iter().enumerate() {
        assert_eq!(schema_violations(shard), Vec::<String>::new());
        assert_eq!(
            shard["plan"]["shard"],
            serde_json::json!({"index": i, "count": 3})
        );
        assert_eq!(shard["plan"]["requests"], 10_000);
        assert_eq!(shard["plan"]["connections"], 2);
        assert_eq!(shard["plan_hash"], shards[0]["plan_hash"]);
        assert!(
            num(&shard["start"]["skew_ms"]).abs() < 1000.0,
            "{}",
            shard["start"]
        );
    }
    let merged_path = dir.path().join("merged.json");
    let out = merge(&paths, &["-o", merged_path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("merged 3 of 3 shards"), "{text}");
    assert!(text.contains("shard 2/3  start skew"), "{text}");
    let merged = read_report(&merged_path);
    assert_eq!(schema_violations(&merged), Vec::<String>::new());
    let run = &merged["runs"][0];
    assert_eq!(run["summary"]["requests"], 30_000);
    assert_eq!(run["summary"]["ok"], 30_000);
    assert_eq!(merged["plan"]["requests"], 30_000, "the whole plan again");
    assert_eq!(merged["plan"]["connections"], 6);
    assert_eq!(merged["plan"]["shard"], Value::Null);
    let series_total: u64 = run["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(series_total, 30_000);

    // The union, computed here from the shards' own histograms.
    let mut union = decode(&shards[0]["runs"][0]["histogram"]);
    for shard in &shards[1..] {
        union.add(decode(&shard["runs"][0]["histogram"])).unwrap();
    }
    assert_eq!(union.len(), 30_000);
    let lat = |s: &Value, k: &str| num(&s["runs"][0]["summary"]["latency_ms"][k]);
    let min_us = shards.iter().map(|s| lat(s, "min")).fold(f64::INFINITY, f64::min) * 1000.0;
    let max_us = shards.iter().map(|s| lat(s, "max")).fold(0.0, f64::max) * 1000.0;
    for (key, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        let expected = (union.value_at_quantile(q) as f64).clamp(min_us, max_us) / 1000.0;
        let got = num(&run["summary"]["latency_ms"][key]);
        assert!(
            (got - expected).abs() < 1e-9,
            "{key}: merged {got} ms, union {expected} ms"
        );
    }
    assert_eq!(
        decode(&run["histogram"]),
        union,
        "the merged histogram is the union"
    );
}

#[test]
fn a_striped_rate_over_three_shards_keeps_the_single_schedule() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let target_url = url(&server, "/hi");
    let _quiet = timed();
    let paths = run_shards(
        dir.path(),
        3,
        &[
            "run",
            &target_url,
            "-R",
            "3000",
            "-d",
            "4s",
            "-c",
            "12",
            "-t",
            "1",
            "--start-at",
            "+2s",
        ],
    );
    let out = merge(&paths, &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let merged: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let run = &merged["runs"][0];
    let requests = num(&run["summary"]["requests"]);
    assert!(
        (requests - 12_000.0).abs() <= 120.0,
        "{requests} requests, want 12,000 within 1%"
    );
    assert_eq!(num(&merged["plan"]["rate"]), 3000.0);
    // The single run's schedule: 3000 arrivals in every full second.
    let rows = run["series"].as_array().unwrap();
    assert!(rows.len() >= 4, "{rows:?}");
    for row in &rows[..4] {
        let n = num(&row["requests"]);
        assert!(
            (n - 3000.0).abs() <= 60.0,
            "interval {}: {n} requests, want 3000 within 2%",
            row["t_s"]
        );
        assert!((num(&row["load"]) - 3000.0).abs() < 1e-6, "{row}");
    }
}

#[test]
fn merge_refuses_what_does_not_belong_together() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let target_url = url(&server, "/hi");
    let a = run_shards(
        dir.path(),
        2,
        &["run", &target_url, "-n", "200", "-c", "2", "-t", "1"],
    );
    let other_dir = tempfile::tempdir().unwrap();
    let b = run_shards(
        other_dir.path(),
        2,
        &["run", &target_url, "-n", "300", "-c", "2", "-t", "1"],
    );

    let refused = |paths: &[PathBuf], extra: &[&str], expect: &str| {
        let out = merge(paths, extra);
        assert_eq!(out.status.code(), Some(2), "{paths:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.contains(expect), "{err}");
    };
    refused(&a[..1], &[], "shard 1 of 2 missing");
    refused(&[a[0].clone(), b[1].clone()], &[], "ran a different plan");
    refused(&[a[0].clone(), a[0].clone()], &[], "given twice");
    let damaged = dir.path().join("damaged.json");
    let text = std::fs::read_to_string(&a[1]).unwrap();
    std::fs::write(&damaged, &text[..text.len() / 2]).unwrap();
    refused(&[a[0].clone(), damaged], &[], "is not a volley JSON report");
    let foreign = dir.path().join("foreign.json");
    std::fs::write(&foreign, r#"{"schema": "k6.summary/1"}"#).unwrap();
    refused(&[a[0].clone(), foreign], &[], "is a 'k6.summary/1' report");

    // --partial merges what there is, and says so.
    let partial = dir.path().join("partial.json");
    let out = merge(&a[..1], &["--partial", "-o", partial.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("PARTIAL: shard 1 missing"),
        "{}",
        stdout(&out)
    );
    let report = read_report(&partial);
    assert_eq!(report["merged"]["missing"], serde_json::json!([1]));
    assert_eq!(report["runs"][0]["summary"]["requests"], 100);

    // A threshold broken on the merged run exits 3, as for a run.
    let out = merge(&a, &["--threshold", "rps<1"]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    assert!(stdout(&out).contains("FAIL"), "{}", stdout(&out));
}

#[test]
fn a_saved_report_reads_back_into_the_same_report() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let paths = run_shards(
        dir.path(),
        1,
        &["run", &url(&server, "/hi"), "-n", "500", "-c", "2", "-t", "1"],
    );
    let written = read_report(&paths[0]);
    let loaded = volley::report::SavedReport::load(&paths[0]).unwrap();
    let again: Value = serde_json::from_str(&loaded.to_json()).unwrap();
    assert_eq!(again, written, "load then save changes nothing");
    let rows = &loaded.runs[0].series;
    let per_row: u64 = rows
        .iter()
        .map(|r| r.histogram.as_ref().unwrap().histogram().unwrap().len())
        .sum();
    assert_eq!(
        per_row, loaded.runs[0].summary.ok,
        "the rows' histograms add up to the run's"
    );
}

#[test]
fn a_late_shard_fails_its_start() {
    let server = target();
    let past =
        humantime::format_rfc3339_seconds(std::time::SystemTime::now() - std::time::Duration::from_secs(5))
            .to_string();
    let out = volley(&[
        "run",
        &url(&server, "/hi"),
        "-n",
        "10",
        "--shard",
        "0/2",
        "--start-at",
        &past,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("came up") && err.contains("--start-tolerance"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = volley(&["run", &url(&server, "/hi"), "-n", "10", "--shard", "2/2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("invalid --shard '2/2'"), "{}", stderr(&out));
}
