//! `--out otlp=URL` against a real OpenTelemetry Collector on 127.0.0.1,
//! built by `.ci/otel-collector` (pinned, from the Go module proxy) and run
//! with `.ci/otelcol.yaml`: its OTLP/HTTP receiver takes what volley sends,
//! its file exporter writes every accepted batch as OTLP/JSON for the test
//! to read back.
//!
//! The collector is found at `$VOLLEY_OTELCOL` or `target/otelcol`; off CI
//! its absence skips the test with a note, on CI it fails.

use super::receivers::free_port;
use super::support::{exclusive, read_report, stderr, summary, target, url, volley};
use serde_json::Value;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn collector() -> Option<PathBuf> {
    let path = std::env::var_os("VOLLEY_OTELCOL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/otelcol"));
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must test OTLP against a real collector (.ci/otel-collector builds it)"
    );
    eprintln!(
        "note: no collector at {} (run .ci/otel-collector); the OTLP check was skipped",
        path.display()
    );
    None
}

/// Every data point of `metric` in the collector's file, in arrival order.
pub(super) fn points(lines: &str, metric: &str) -> Vec<Value> {
    let mut found = Vec::new();
    for line in lines.lines().filter(|l| !l.trim().is_empty()) {
        let batch: Value = serde_json::from_str(line).expect("the collector writes OTLP/JSON lines");
        for resource in batch["resourceMetrics"].as_array().into_iter().flatten() {
            for scope in resource["scopeMetrics"].as_array().into_iter().flatten() {
                for m in scope["metrics"].as_array().into_iter().flatten() {
                    if m["name"] != metric {
                        continue;
                    }
                    let data = ["sum", "exponentialHistogram", "gauge"]
                        .iter()
                        .find_map(|k| m.get(*k))
                        .expect("a known kind");
                    let mut data = data.clone();
                    let temporality = data["aggregationTemporality"].clone();
                    let monotonic = data["isMonotonic"].clone();
                    for mut point in data["dataPoints"].as_array_mut().unwrap().drain(..) {
                        point["temporality"] = temporality.clone();
                        point["monotonic"] = monotonic.clone();
                        point["unit"] = m["unit"].clone();
                        found.push(point);
                    }
                }
            }
        }
    }
    found
}

pub(super) fn attribute<'a>(point: &'a Value, key: &str) -> Option<&'a str> {
    point["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .and_then(|a| a["value"]["stringValue"].as_str())
}

/// OTLP/JSON writes 64-bit integers as strings.
pub(super) fn int(v: &Value) -> u64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .or(v.as_u64())
        .unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// The report's one output is OTLP, dropped nothing, and delivered each
/// batch the collector wrote (`lines`).
pub(super) fn all_delivered(report: &Value, lines: &str) {
    let output = &report["outputs"][0];
    assert_eq!(
        (output["kind"].as_str(), output["dropped"].as_u64()),
        (Some("otlp"), Some(0))
    );
    assert_eq!(
        lines.lines().count() as u64,
        output["delivered"].as_u64().unwrap()
    );
}

/// A collector on a free loopback port, writing what it accepts to a file
/// of its own.
pub(super) struct Collector {
    child: Child,
    pub(super) addr: SocketAddr,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Collector {
    /// Starts one and waits until it takes connections; `None` where no
    /// collector is built (see [`collector`]).
    pub(super) fn start() -> Option<Collector> {
        let bin = collector()?;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("metrics.jsonl");
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/otelcol.yaml");
        let mut child = Command::new(bin)
            .arg("--config")
            .arg(&config)
            .env("OTELCOL_ENDPOINT", addr.to_string())
            .env("OTELCOL_OUTPUT", &file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the collector starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the collector on {addr} did not come up"
            );
            assert!(child.try_wait().unwrap().is_none(), "the collector exited");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Collector {
            child,
            addr,
            file,
            _dir: dir,
        })
    }

    /// Stops it and returns what it wrote: one OTLP/JSON batch a line.
    pub(super) fn stop(mut self) -> String {
        // SIGTERM: the collector flushes its file on shutdown.
        // SAFETY: signals our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        std::fs::read_to_string(&self.file).expect("the collector wrote its file")
    }
}

impl Drop for Collector {
    /// A test that failed before [`Collector::stop`] leaves no collector
    /// running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn an_opentelemetry_collector_receives_the_run_s_totals() {
    let Some(collector) = Collector::start() else {
        return;
    };
    let _serial = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let addr = collector.addr;
    let server = target();
    let report_path = dir.path().join("r.json");
    let out = volley(&[
        "run",
        "-n",
        "20000",
        "-c",
        "10",
        "-q",
        "--run-id",
        "otlp-test",
        "--tag",
        "team=load",
        "--out",
        &format!("otlp=http://{addr}"),
        "-o",
        report_path.to_str().unwrap(),
        &url(&server, "/hi"),
    ]);
    let lines = collector.stop();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let report = read_report(&report_path);
    all_delivered(&report, &lines);

    let requests = points(&lines, "volley.requests");
    let last = requests.last().expect("volley.requests arrived");
    assert_eq!(int(&last["asInt"]), 20_000);
    assert_eq!(
        int(&last["asInt"]),
        summary(&report)["requests"].as_u64().unwrap()
    );
    // Cumulative (2) and monotonic, with the run's labels as attributes.
    assert_eq!(
        (last["temporality"].as_u64(), last["monotonic"].as_bool()),
        (Some(2), Some(true))
    );
    assert_eq!(attribute(last, "run"), Some("otlp-test"));
    assert_eq!(attribute(last, "team"), Some("load"));
    assert_eq!(attribute(last, "item"), Some("0"));
    let counts: Vec<u64> = requests.iter().map(|p| int(&p["asInt"])).collect();
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "cumulative: {counts:?}");

    let durations = points(&lines, "volley.request.duration");
    let hist = durations.last().expect("volley.request.duration arrived");
    assert_eq!(int(&hist["count"]), 20_000);
    assert_eq!(hist["unit"], "s");
    assert_eq!(hist["scale"], 5);
    let in_buckets: u64 = hist["positive"]["bucketCounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(int)
        .sum();
    assert_eq!(in_buckets, 20_000);
    let mean_s = hist["sum"].as_f64().unwrap() / 20_000.0;
    let report_mean_s = summary(&report)["latency_ms"]["mean"].as_f64().unwrap() / 1000.0;
    assert!(
        (mean_s - report_mean_s).abs() <= 0.01 * report_mean_s,
        "{mean_s} vs {report_mean_s}"
    );
    assert!(
        points(&lines, "volley.request.errors").is_empty(),
        "nothing failed"
    );
}
