//! The HTML report and the live dashboard, checked in a real browser:
//! Debian's chromium driven by Playwright for Python (tests/browser/*.py,
//! installed by .ci/run into target/browser-venv). The scripts check what a
//! reader sees (every chart drew every interval, hovering shows the JSON
//! report's values, a drag zooms, a legend click hides a series, no console
//! error); these tests make the reports, run the scripts and compare what
//! the browser saw with the JSON report. Off CI, without the venv, the
//! browser part is skipped with a note; on CI (CI set) it must run.

use super::support::{exclusive, read_report, stderr, volley};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The Python with Playwright: $VOLLEY_BROWSER_PYTHON, else the venv
/// .ci/run makes.
pub(super) fn browser_python() -> Option<PathBuf> {
    let python = std::env::var_os("VOLLEY_BROWSER_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/browser-venv/bin/python"));
    if python.exists() {
        return Some(python);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must check the pages in a browser: .ci/run installs Playwright into target/browser-venv"
    );
    eprintln!(
        "note: no Playwright venv ({}); the browser checks were skipped",
        python.display()
    );
    None
}

/// Runs a check script; panics with its message when it fails. Returns
/// the JSON line it printed.
fn browser_check(python: &Path, script: &str, args: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/browser")
        .join(script);
    let out = Command::new(python)
        .arg(&script)
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{} failed:\n{}\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("{}")).expect("the check prints its figures")
}

/// Checks the report page `DIR/NAME.html` against `DIR/NAME.json` (the
/// screenshot goes to `report-NAME.png`); returns what the check printed.
fn check_report_page(python: &Path, dir: &Path, name: &str) -> Value {
    let file = |ext: &str| dir.join(format!("{name}.{ext}")).display().to_string();
    let shot = screenshot(&format!("report-{name}.png"));
    browser_check(python, "check_report.py", &[&file("html"), &file("json"), &shot])
}

fn screenshot(name: &str) -> String {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(name)
        .display()
        .to_string()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The page stands alone: its data is embedded and nothing is fetched.
fn assert_self_contained(page: &str) {
    assert!(page.contains("id=\"volley-data\""), "the data is embedded");
    assert!(!page.contains("<script src") && !page.contains("<link rel=\"stylesheet\""));
    assert!(
        !page.contains("\"series\""),
        "the data is compressed, not inline JSON"
    );
}

#[test]
fn the_html_report_reads_right_in_a_browser() {
    let _exclusive = exclusive();
    let port = free_port();
    let serve = format!("{} serve --addr 127.0.0.1:{port}", env!("CARGO_BIN_EXE_volley"));
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let out = volley(&[
        "run",
        "--spawn",
        &serve,
        "-c",
        "20",
        "-d",
        "2s",
        "--interval",
        "200ms",
        "-q",
        "--html",
        &path("run.html"),
        "-o",
        &path("run.json"),
        &format!("http://127.0.0.1:{port}/alloc/256"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_self_contained(&std::fs::read_to_string(path("run.html")).unwrap());
    let out = volley(&["report", &path("run.json"), "--html", &path("again.html")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(path("run.html")).unwrap(),
        std::fs::read_to_string(path("again.html")).unwrap(),
        "a saved report renders the same page"
    );

    let Some(python) = browser_python() else { return };
    let figures = check_report_page(&python, dir.path(), "run");
    eprintln!(
        "report drawn: {figures} (screenshot {})",
        screenshot("report-run.png")
    );
}

/// A stall of the target leaves intervals without a response: the report
/// has them as such, keeps their figures as numbers (the schema's), and
/// its HTML page is written.
#[test]
fn a_stall_leaves_intervals_without_responses_in_the_report() {
    let _exclusive = exclusive();
    let server = super::support::target();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let url = super::support::url(&server, "/hi");
    // The stall comes early, so that the middle of the chart, where the
    // page's check zooms in, has responses to draw.
    let out = super::support::paused_during(&server, Duration::from_millis(100), 1000, || {
        volley(&[
            "run",
            "-c",
            "4",
            "-d",
            "4000ms",
            "--interval",
            "100ms",
            "--timeout",
            "5s",
            "-q",
            "--html",
            &path("stall.html"),
            "-o",
            &path("stall.json"),
            &url,
        ])
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let report = read_report(&dir.path().join("stall.json"));
    let rows = report["runs"][0]["series"].as_array().unwrap();
    let silent = rows.iter().filter(|r| r["requests"] == r["errors"]).count();
    assert!(silent >= 3, "the stall left {silent} intervals without responses");
    assert!(
        rows.iter().all(|r| r["p99"].is_number()),
        "the schema's numbers stay"
    );
    // In the browser: the latency chart leaves a gap for each run of
    // intervals without responses (a line per stretch with them), and
    // its zoom, hover and legend still work.
    let Some(python) = browser_python() else { return };
    let checked = check_report_page(&python, dir.path(), "stall");
    assert!(
        checked["p99_lines"].as_u64().unwrap() >= 2,
        "the stall is a gap between lines: {checked}"
    );
}

/// The page rendered again from a saved report is the run's own only if
/// every figure reads back to the last bit (an interval's end, 7 x 0.2 s,
/// is written 1.4000000000000001). serde_json's default parser can land
/// one unit in the last place off; its `float_roundtrip` feature is exact.
/// The test above cannot tell: a dev-dependency turns the feature on for
/// every build `cargo test` makes, the volley binary it runs included,
/// while `cargo build --release` leaves it off unless the manifest asks.
#[test]
fn the_shipped_binary_reads_saved_figures_back_exactly() {
    let manifest = include_str!("../../Cargo.toml");
    let serde_json = manifest
        .lines()
        .find(|line| line.starts_with("serde_json ="))
        .expect("Cargo.toml depends on serde_json");
    assert!(
        serde_json.contains("\"float_roundtrip\""),
        "Cargo.toml's serde_json must turn on float_roundtrip: {serde_json}"
    );
}

/// Under -R the over-time chart shows each interval's service time beside
/// its latency from the intended send, and hovering shows both as the JSON
/// report has them.
#[test]
fn an_open_model_report_draws_service_time_over_time() {
    let _exclusive = exclusive();
    let server = super::support::target();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let out = volley(&[
        "run",
        "-R",
        "300",
        "-c",
        "4",
        "-d",
        "2s",
        "--interval",
        "200ms",
        "-q",
        "--html",
        &path("rate.html"),
        "-o",
        &path("rate.json"),
        &super::support::url(&server, "/sleep/1"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = read_report(Path::new(&path("rate.json")));
    let rows = report["runs"][0]["series"].as_array().unwrap();
    assert!(rows.len() >= 9, "{rows:?}");
    assert!(rows.iter().all(|r| r["service"]["p99"].is_number()), "{rows:?}");

    let Some(python) = browser_python() else { return };
    let figures = check_report_page(&python, dir.path(), "rate");
    assert_eq!(
        figures["service_lines"], 4,
        "service p50, p90, p99 and max drawn over time: {figures}"
    );
}

#[test]
fn step_plan_and_compare_pages_read_right_in_a_browser() {
    let _exclusive = exclusive();
    let server = super::support::target();
    let base = super::support::url(&server, "");
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let out = volley(&[
        "step",
        "--levels",
        "1,2,4",
        "--step-duration",
        "500ms",
        "--interval",
        "100ms",
        "--slo",
        "p99<1s",
        "-q",
        "--html",
        &path("step.html"),
        "-o",
        &path("step.json"),
        &format!("{base}/sleep/5"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));

    std::fs::write(
        path("plan.yml"),
        "plan:\n  - name: First\n    request: {url: /hi}\n  - name: Second\n    request: {url: /sleep/1}\n",
    )
    .unwrap();
    let out = volley(&[
        "plan",
        &path("plan.yml"),
        "--base",
        &base,
        "-d",
        "1s",
        "--interval",
        "100ms",
        "-q",
        "--html",
        &path("plan.html"),
        "-o",
        &path("plan.json"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = volley(&[
        "compare",
        &path("plan.json"),
        &path("plan.json"),
        "--html",
        &path("compare.html"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_self_contained(&std::fs::read_to_string(path("compare.html")).unwrap());

    let Some(python) = browser_python() else { return };
    check_report_page(&python, dir.path(), "step");
    check_report_page(&python, dir.path(), "plan");
    browser_check(
        &python,
        "check_report.py",
        &[
            &path("compare.html"),
            &path("plan.json"),
            &screenshot("report-compare.png"),
            "compare",
        ],
    );
}

/// Reads volley's stderr until it names the dashboard's address, and
/// keeps draining it after (a closed pipe would fail volley's writes).
fn dashboard_url(stderr: impl std::io::Read + Send + 'static) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("dashboard: ") {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("volley printed the dashboard's address")
}

#[test]
fn the_dashboard_follows_a_run_to_its_report() {
    let _exclusive = exclusive();
    let server = super::support::target();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("live.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args([
            "run",
            "-c",
            "4",
            "-d",
            "15s",
            "--interval",
            "250ms",
            "-q",
            "--dashboard=127.0.0.1:0",
            "-o",
            json.to_str().unwrap(),
            &super::support::url(&server, "/sleep/1"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("volley starts");
    let url = dashboard_url(child.stderr.take().unwrap());
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    // Opened a moment into the run, so the page must catch up from history.
    std::thread::sleep(Duration::from_millis(1500));
    let seen = browser_python().map(|python| {
        browser_check(
            &python,
            "check_dashboard.py",
            &[&url, &screenshot("dashboard.png")],
        )
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "volley did not exit after its run");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "volley failed: {status}");
    let report = read_report(&json);
    if let Some(seen) = seen {
        assert_eq!(
            seen["final_requests"], report["runs"][0]["summary"]["requests"],
            "the dashboard's last count is the report's: {seen}"
        );
    }
}

/// `volley merge --follow --dashboard`: the page follows three shards as
/// one run, its totals growing, each shard shown running, and ends on the
/// merged report.
#[test]
fn the_dashboard_follows_a_merged_run_to_its_report() {
    let _exclusive = exclusive();
    let server = super::support::target();
    let dir = tempfile::tempdir().unwrap();
    let merged = dir.path().join("merged.json");
    let streams: Vec<String> = (0..3)
        .map(|i| dir.path().join(format!("s-{i}.jsonl")).display().to_string())
        .collect();
    let mut args = vec![
        "merge",
        "--follow",
        "--dashboard=127.0.0.1:0",
        "-o",
        merged.to_str().unwrap(),
    ];
    args.extend(streams.iter().map(String::as_str));
    let mut follower = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("volley starts");
    let url = dashboard_url(follower.stderr.take().unwrap());
    let target = super::support::url(&server, "/sleep/1");
    let shards: Vec<_> = streams
        .iter()
        .enumerate()
        .map(|(i, stream)| {
            Command::new(env!("CARGO_BIN_EXE_volley"))
                .args([
                    "run",
                    &target,
                    "-c",
                    "3",
                    "-t",
                    "1",
                    "-d",
                    "8s",
                    "--interval",
                    "250ms",
                ])
                .args([
                    "--start-at",
                    "+2s",
                    "--shard",
                    &format!("{i}/3"),
                    "--stream",
                    stream,
                    "-q",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("a shard starts")
        })
        .collect();
    // Opened a moment into the shards' run, so the page catches up from history.
    std::thread::sleep(Duration::from_millis(3500));
    let seen = browser_python().map(|python| {
        browser_check(
            &python,
            "check_dashboard.py",
            &[&url, &screenshot("dashboard-merged.png"), "3"],
        )
    });
    let deadline = Instant::now() + Duration::from_secs(40);
    for mut child in shards.into_iter().chain([follower]) {
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "a shard or the follower did not exit");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "{status}");
    }
    let report = read_report(&merged);
    assert_eq!(report["merged"]["shards"].as_array().unwrap().len(), 3);
    if let Some(seen) = seen {
        assert_eq!(
            seen["final_requests"], report["runs"][0]["summary"]["requests"],
            "the dashboard's last count is the merged report's: {seen}"
        );
    }
}

#[test]
fn the_dashboard_refuses_what_it_cannot_serve() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = volley(&[
        "run",
        "-n",
        "1",
        &format!("--dashboard={addr}"),
        "http://127.0.0.1:9/",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("cannot serve the dashboard") && err.lines().count() == 1,
        "{err}"
    );
    let out = volley(&["run", "-n", "1", "--dashboard=localhost", "http://127.0.0.1:9/"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
