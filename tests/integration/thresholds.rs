//! `--threshold` and `--abort-on-fail`: pass/fail blocks, exit code 3, and
//! a run stopped as soon as it breaks a criterion.

use super::support::{stderr, stdout, target, url, volley, volley_json};
use std::time::Instant;

#[test]
fn thresholds_pass_and_fail_with_exit_codes() {
    let server = target();
    let sleep = url(&server, "/sleep/20");
    let (out, report) = volley_json(&[
        "run",
        "-n",
        "100",
        "-c",
        "10",
        "--threshold",
        "p99<200ms",
        "--threshold",
        "errors<1%",
        "--threshold",
        "rps>10",
        &sleep,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = report["thresholds"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|r| r["passed"] == true), "{results:?}");
    assert!(stdout(&out).contains("thresholds") && stdout(&out).contains("pass   p99<200ms"));

    let (out, report) = volley_json(&[
        "run",
        "-n",
        "100",
        "-c",
        "10",
        "--threshold",
        "p50<5ms",
        "--threshold",
        "errors<1%",
        &sleep,
    ]);
    assert_eq!(out.status.code(), Some(3), "a failed threshold exits 3");
    let results = report["thresholds"].as_array().unwrap();
    assert_eq!(results[0]["passed"], false);
    assert!(results[0]["value"].as_f64().unwrap() >= 20.0);
    assert_eq!(results[1]["passed"], true);
    assert!(stdout(&out).contains("FAIL   p50<5ms"));
}

#[test]
fn abort_on_fail_stops_the_run_early() {
    let server = target();
    let started = Instant::now();
    let (out, report) = volley_json(&[
        "run",
        "-d",
        "20s",
        "-c",
        "4",
        "--threshold",
        "errors<1%",
        "--abort-on-fail",
        &url(&server, "/status/500"),
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(started.elapsed().as_secs_f64() < 5.0, "stopped long before 20 s");
    assert_eq!(report["aborted_by"], "errors<1%");
    assert!(stdout(&out).contains("stopped early: threshold errors<1% failed"));
}

#[test]
fn thresholds_apply_to_plans_and_steps() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.yml");
    std::fs::write(&plan, "plan:\n  - name: hi\n    request: {url: /hi}\n").unwrap();
    let (out, _) = volley_json(&[
        "plan",
        plan.to_str().unwrap(),
        "--base",
        &url(&server, ""),
        "-n",
        "20",
        "--threshold",
        "rps>1000000",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let (out, report) = volley_json(&[
        "step",
        "--levels",
        "1,2",
        "--step-duration",
        "300ms",
        "--slo",
        "p99<1s",
        "--threshold",
        "errors<1%",
        &url(&server, "/hi"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let results = report["thresholds"].as_array().unwrap();
    assert_eq!(results.len(), 1, "judged on the maximum-load level");
}

#[test]
fn a_bad_threshold_is_a_usage_error() {
    let out = volley(&["run", "--threshold", "p99<soon", "http://127.0.0.1:1/"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--threshold"));
    let out = volley(&["run", "--abort-on-fail", "http://127.0.0.1:1/"]);
    assert_eq!(out.status.code(), Some(2), "--abort-on-fail needs a threshold");
}
