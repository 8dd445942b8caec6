//! Metric outputs against real receivers on 127.0.0.1: Prometheus remote
//! write (native histograms, the classic fallback, three shards summed in
//! PromQL), a receiver that is down or hangs, and the scrape endpoint.

use super::receivers::{Prometheus, free_port, http_get, prometheus_installed};
use super::support::{
    exclusive, num, read_report, schema_violations, stderr, summary, target, timed, url, volley,
};
use serde_json::Value;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};
use volley::sink::metrics::exponential::RELATIVE_ERROR;

fn run_id(name: &str) -> String {
    format!("{name}-{}", std::process::id())
}

fn within_error(from_receiver_s: f64, report_ms: f64) -> bool {
    let report_s = report_ms / 1000.0;
    (from_receiver_s - report_s).abs() <= RELATIVE_ERROR * report_s
}

#[test]
fn prometheus_gets_exact_counts_and_a_native_histogram_within_the_stated_error() {
    if !prometheus_installed() {
        return;
    }
    let _serial = exclusive();
    let prometheus = Prometheus::start(true);
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let id = run_id("native");
    let out = volley(&[
        "run",
        "-n",
        "20000",
        "-c",
        "10",
        "-q",
        "--run-id",
        &id,
        "--tag",
        "env=ci",
        "--out",
        &format!("prometheus={}", prometheus.write_url()),
        "-o",
        path.to_str().unwrap(),
        &url(&server, "/hi"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("run id: {id}")),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let report = read_report(&path);
    assert_eq!(schema_violations(&report), Vec::<String>::new());
    assert_eq!(report["run_id"], id.as_str());
    let output = &report["outputs"][0];
    assert_eq!(
        (output["kind"].as_str(), output["histograms"].as_str()),
        (Some("prometheus"), Some("native"))
    );
    assert_eq!(output["dropped"], 0);
    assert!(output["delivered"].as_u64().unwrap() >= 1);

    let sel = format!("{{run=\"{id}\",env=\"ci\",item=\"0\"}}");
    assert_eq!(prometheus.value(&format!("volley_requests_total{sel}")), 20_000.0);
    assert_eq!(
        prometheus.value(&format!("volley_responses_total{{run=\"{id}\",status=\"200\"}}")),
        20_000.0
    );
    assert_eq!(
        prometheus.value(&format!("histogram_count(volley_request_duration_seconds{sel})")),
        20_000.0
    );
    let p99 = prometheus.value(&format!(
        "histogram_quantile(0.99, volley_request_duration_seconds{sel})"
    ));
    let report_p99 = num(&summary(&report)["latency_ms"]["p99"]);
    assert!(
        within_error(p99, report_p99),
        "PromQL p99 {p99} s vs the report's {report_p99} ms"
    );
    // No error series exists when nothing failed.
    assert!(
        prometheus
            .query(&format!("volley_request_errors_total{sel}"))
            .is_empty()
    );
}

#[test]
fn three_shards_sum_to_the_merged_report_in_promql() {
    if !prometheus_installed() {
        return;
    }
    let _serial = exclusive();
    let prometheus = Prometheus::start(true);
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let id = run_id("shards");
    let out_flag = format!("prometheus={}", prometheus.write_url());
    let mut paths = Vec::new();
    for index in 0..3 {
        let path = dir.path().join(format!("shard-{index}.json"));
        let shard = format!("{index}/3");
        let out = volley(&[
            "run",
            "-n",
            "20000",
            "-c",
            "6",
            "-q",
            "--shard",
            &shard,
            "--run-id",
            &id,
            "--out",
            &out_flag,
            "-o",
            path.to_str().unwrap(),
            &url(&server, "/hi"),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        paths.push(path.to_str().unwrap().to_string());
    }
    let merged_path = dir.path().join("merged.json");
    let mut merge: Vec<&str> = vec!["merge", "-o", merged_path.to_str().unwrap()];
    merge.extend(paths.iter().map(String::as_str));
    let out = volley(&merge);
    assert!(out.status.success(), "{}", stderr(&out));
    let merged = read_report(&merged_path);
    assert_eq!(merged["run_id"], id.as_str());
    assert_eq!(schema_violations(&merged), Vec::<String>::new());

    let sel = format!("{{run=\"{id}\"}}");
    let per_shard = prometheus.query(&format!("volley_requests_total{sel}"));
    let shards: Vec<&str> = per_shard
        .iter()
        .filter_map(|(l, _)| l["shard"].as_str())
        .collect();
    assert_eq!(per_shard.len(), 3, "{per_shard:?}");
    assert!(["0", "1", "2"].iter().all(|s| shards.contains(s)), "{shards:?}");
    assert_eq!(
        prometheus.value(&format!("sum(volley_requests_total{sel})")),
        20_000.0
    );
    assert_eq!(
        prometheus.value(&format!(
            "histogram_count(sum(volley_request_duration_seconds{sel}))"
        )),
        20_000.0
    );
    let p99 = prometheus.value(&format!(
        "histogram_quantile(0.99, sum(volley_request_duration_seconds{sel}))"
    ));
    let merged_p99 = num(&summary(&merged)["latency_ms"]["p99"]);
    assert!(
        within_error(p99, merged_p99),
        "PromQL p99 {p99} s vs the merged report's {merged_p99} ms"
    );
}

#[test]
fn a_receiver_without_native_histograms_gets_one_line_and_classic_buckets() {
    if !prometheus_installed() {
        return;
    }
    let _serial = exclusive();
    let prometheus = Prometheus::start(false);
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let id = run_id("classic");
    let out = volley(&[
        "run",
        "-n",
        "3000",
        "-c",
        "4",
        "-q",
        "--run-id",
        &id,
        "--out",
        &format!("prometheus={}", prometheus.write_url()),
        "-o",
        path.to_str().unwrap(),
        &url(&server, "/hi"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains("--enable-feature=native-histograms"),
        "{err}"
    );
    let report = read_report(&path);
    assert_eq!(report["outputs"][0]["histograms"], "classic");
    assert_eq!(report["outputs"][0]["dropped"], 0);
    let sel = format!("{{run=\"{id}\"}}");
    assert_eq!(
        prometheus.value(&format!("volley_request_duration_seconds_count{sel}")),
        3000.0
    );
    assert_eq!(
        prometheus.value(&format!(
            "volley_request_duration_seconds_bucket{{run=\"{id}\",le=\"+Inf\"}}"
        )),
        3000.0
    );
    assert_eq!(prometheus.value(&format!("volley_requests_total{sel}")), 3000.0);
}

/// Runs 900 requests at 300/s (3 s) with one output to `receiver`; returns the
/// process output, the report and how long it took.
fn run_against(receiver: &str) -> (std::process::Output, Value, Duration) {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let started = Instant::now();
    let out = volley(&[
        "run",
        "-R",
        "300",
        "-n",
        "900",
        "-c",
        "4",
        "-q",
        "--out",
        &format!("prometheus={receiver}"),
        "-o",
        path.to_str().unwrap(),
        &url(&server, "/hi"),
    ]);
    (out, read_report(&path), started.elapsed())
}

#[test]
fn a_receiver_that_is_down_costs_one_warning_and_counted_drops() {
    let _serial = timed();
    let (out, report, _) = run_against(&format!("http://127.0.0.1:{}/api/v1/write", free_port()));
    assert!(
        out.status.success(),
        "the exit code is the run's: {}",
        stderr(&out)
    );
    let err = stderr(&out);
    assert_eq!(err.lines().filter(|l| l.contains("warning")).count(), 1, "{err}");
    assert!(err.contains("refused"), "{err}");
    assert_eq!(schema_violations(&report), Vec::<String>::new());
    let output = &report["outputs"][0];
    assert!(output["batches"].as_u64().unwrap() >= 3, "{output}");
    assert_eq!(output["delivered"], 0);
    assert_eq!(output["dropped"], output["batches"]);
    assert_eq!(summary(&report)["requests"], 900);
}

#[test]
fn a_receiver_that_never_answers_does_not_hold_the_run() {
    let _serial = timed();
    // Accepts connections (the kernel's backlog) and never reads or answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let (out, report, took) = run_against(&format!("http://{addr}/api/v1/write"));
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().filter(|l| l.contains("warning")).count(), 1, "{err}");
    // 3 s of load, then at most the 5 s flush limit (and start-up).
    assert!(took < Duration::from_secs(11), "took {took:?}");
    let output = &report["outputs"][0];
    assert_eq!(output["delivered"], 0);
    assert!(output["dropped"].as_u64().unwrap() >= 1);
    drop(silent);
}

/// `name{labels} value` lines of an exposition whose name is `metric`.
pub(super) fn samples(text: &str, metric: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse().ok()))
        .collect()
}

/// Scrapes `/metrics` at `addr` every 300 ms while `child` (a volley run
/// serving it) runs, for at most 20 s; returns the pages that held the
/// run's counts (the first intervals may not have them yet), once the
/// child has ended, successfully.
pub(super) fn scrape_while_running(child: &mut std::process::Child, addr: SocketAddr) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut pages = Vec::new();
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        if let Some((200, text)) = http_get(addr, "/metrics")
            && !samples(&text, "volley_requests_total").is_empty()
            && !samples(&text, "volley_request_duration_seconds_count").is_empty()
        {
            pages.push(text);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(child.wait().unwrap().success());
    pages
}

#[test]
fn the_scrape_endpoint_serves_growing_counts_during_the_run() {
    let _serial = timed();
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_volley"))
        .args([
            "run",
            "-R",
            "400",
            "-d",
            "4s",
            "-c",
            "4",
            "-q",
            "--interval",
            "500ms",
            "--run-id",
            "scrape",
            "--metrics-addr",
            &addr.to_string(),
            "-o",
            path.to_str().unwrap(),
            &url(&server, "/hi"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut seen: Vec<(f64, f64)> = Vec::new();
    let (mut connections, mut in_flight) = (Vec::new(), Vec::new());
    for text in scrape_while_running(&mut child, addr) {
        assert!(text.contains("run=\"scrape\""), "{text}");
        assert!(
            text.contains("# TYPE volley_request_duration_seconds histogram"),
            "{text}"
        );
        seen.push((
            samples(&text, "volley_requests_total")[0],
            samples(&text, "volley_request_duration_seconds_count")[0],
        ));
        connections.extend(samples(&text, "volley_open_connections"));
        in_flight.extend(samples(&text, "volley_requests_in_flight"));
    }
    let report = read_report(&path);
    let total = num(&summary(&report)["requests"]);
    assert!(seen.len() >= 2, "scraped {seen:?}");
    assert!(
        seen.windows(2).all(|w| w[0].0 <= w[1].0),
        "counts only grow: {seen:?}"
    );
    assert!(
        seen.first().unwrap().0 < seen.last().unwrap().0,
        "counts grow: {seen:?}"
    );
    // Every scrape is a consistent interval total: successes never exceed
    // requests, and nothing exceeds the final report.
    assert!(
        seen.iter().all(|(r, c)| c <= r && *r <= total),
        "{seen:?} vs {total}"
    );
    // -c 4 keeps four connections to the target open; under -R at most
    // those four carry a request at a time (HTTP/1.1, no pipelining).
    if cfg!(target_os = "linux") {
        assert!(
            connections.contains(&4.0),
            "open connections seen: {connections:?}"
        );
        assert!(connections.iter().all(|n| *n <= 4.0), "{connections:?}");
    }
    assert_eq!(in_flight.len(), seen.len(), "one in-flight gauge per scrape");
    assert!(in_flight.iter().all(|n| *n <= 4.0), "{in_flight:?}");
}

#[test]
fn plan_items_are_labelled_by_name_never_by_interpolated_url() {
    if !prometheus_installed() {
        return;
    }
    let _serial = exclusive();
    let prometheus = Prometheus::start(true);
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.yml");
    std::fs::write(
        &plan,
        format!(
            "base: '{}'\nconcurrency: 2\niterations: 50\nplan:\n  - name: hello\n    request:\n      url: /hi\n  \
             - name: user {{{{ item }}}}\n    with_items: [1, 2, 3]\n    request:\n      url: /echo?u={{{{ item }}}}\n",
            url(&server, "")
        ),
    )
    .unwrap();
    let id = run_id("plan");
    let out = volley(&[
        "plan",
        plan.to_str().unwrap(),
        "-q",
        "--run-id",
        &id,
        "--out",
        &format!("prometheus={}", prometheus.write_url()),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut items: Vec<(String, f64)> = prometheus
        .query(&format!("volley_requests_total{{run=\"{id}\"}}"))
        .into_iter()
        .map(|(labels, v)| (labels["item"].as_str().unwrap().to_string(), v))
        .collect();
    items.sort_by(|a, b| a.0.cmp(&b.0));
    // One series per plan item, named as written: three interpolated URLs
    // are one series.
    assert_eq!(
        items,
        vec![
            ("hello".to_string(), 50.0),
            ("user {{ item }}".to_string(), 150.0)
        ]
    );
}

#[test]
fn failures_are_counted_by_kind_and_responses_by_status() {
    if !prometheus_installed() {
        return;
    }
    let _serial = exclusive();
    let prometheus = Prometheus::start(true);
    let server = target();
    let write = format!("prometheus={}", prometheus.write_url());
    let id = run_id("errors");
    // Two URLs, one after another: items 0 and 1. The first always answers
    // 503 (a `status` failure), the second drops the connection (`reset`).
    let out = volley(&[
        "run",
        "-n",
        "300",
        "-c",
        "2",
        "-q",
        "--run-id",
        &id,
        "--out",
        &write,
        &url(&server, "/status/503"),
        &url(&server, "/drop"),
    ]);
    // Nothing succeeded: exit 1, as without the output.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let value = |q: String| prometheus.value(&q);
    assert_eq!(
        value(format!("volley_requests_total{{run=\"{id}\",item=\"0\"}}")),
        300.0
    );
    assert_eq!(
        value(format!(
            "volley_responses_total{{run=\"{id}\",item=\"0\",status=\"503\"}}"
        )),
        300.0
    );
    assert_eq!(
        value(format!(
            "volley_request_errors_total{{run=\"{id}\",item=\"0\",kind=\"status\"}}"
        )),
        300.0
    );
    assert_eq!(
        value(format!(
            "volley_request_errors_total{{run=\"{id}\",item=\"1\",kind=\"reset\"}}"
        )),
        300.0
    );
    // The error ratio the README shows, over the whole run: every request failed.
    let ratio = value(format!(
        "sum(volley_request_errors_total{{run=\"{id}\"}}) / sum(volley_requests_total{{run=\"{id}\"}})"
    ));
    assert_eq!(ratio, 1.0);
}
