//! `volley run` end to end: the real binary against the embedded target on
//! 127.0.0.1 port 0. Every run is bounded by a request count or a short
//! duration, and by the harness timeout in `volley()`.

use super::support::{
    exclusive, num, paused_during, read_report, schema_violations, stderr, stdout, summary, target, timed,
    url, volley, volley_json,
};
use serde_json::Value;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn assert_no_panic(out: &Output) {
    let err = stderr(out);
    assert!(!err.contains("panicked"), "volley panicked: {err}");
}

#[test]
fn request_count_is_exact() {
    let server = target();
    let (out, report) = volley_json(&["run", "-n", "1000", "-c", "7", "-t", "2", &url(&server, "/hi")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s = summary(&report);
    assert_eq!(s["requests"], 1000);
    assert_eq!(s["ok"], 1000);
    assert_eq!(s["status"]["200"], 1000);
    assert_eq!(
        server.stats().requests_received,
        1000,
        "the target saw exactly 1000 requests"
    );
    assert_eq!(
        server.stats().connections_accepted,
        7,
        "connections spread over threads, none dropped"
    );
    assert!(stdout(&out).contains("1,000 ok"), "{}", stdout(&out));
}

#[test]
fn unexpected_status_counts_as_status_errors() {
    let server = target();
    let (out, report) = volley_json(&["run", "-n", "200", "-c", "4", &url(&server, "/status/500")]);
    assert_no_panic(&out);
    let s = summary(&report);
    assert_eq!(s["requests"], 200);
    assert_eq!(s["errors_by_kind"]["status"], 200);
    assert_eq!(s["status"]["500"], 200);
    let fives: u64 = report["runs"][0]["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status_classes"][4].as_u64().unwrap())
        .sum();
    assert_eq!(fives, 200, "every interval counts its 5xx responses");
    assert!(s["error_examples"]["status"].as_str().unwrap().contains("500"));
    assert_eq!(out.status.code(), Some(1), "nothing succeeded: exit 1");
    assert!(stderr(&out).contains("no request to"), "{}", stderr(&out));
}

#[test]
fn expected_status_can_be_widened() {
    let server = target();
    let (out, report) = volley_json(&["run", "-n", "50", "--status", "500", &url(&server, "/status/500")]);
    assert!(out.status.success());
    assert_eq!(summary(&report)["ok"], 50);
    assert!(summary(&report)["errors_by_kind"].as_object().unwrap().is_empty());
}

/// Each fault gives its own error kind, a printed report, an orderly exit.
fn fault_kind(args: &[&str], kind: &str) {
    let (out, report) = volley_json(args);
    assert_no_panic(&out);
    let s = summary(&report);
    assert_eq!(s["ok"], 0, "{s}");
    let kinds = s["errors_by_kind"].as_object().unwrap();
    assert_eq!(kinds.keys().collect::<Vec<_>>(), vec![kind], "{s}");
    assert_eq!(kinds[kind], s["requests"]);
    assert!(!s["error_examples"][kind].as_str().unwrap().is_empty());
    assert!(stdout(&out).contains("errors"), "the text report is printed");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn dropped_connection_is_reset() {
    let server = target();
    fault_kind(&["run", "-n", "20", "-c", "2", &url(&server, "/drop")], "reset");
}

#[test]
fn stalled_response_is_timeout() {
    let server = target();
    fault_kind(
        &[
            "run",
            "-n",
            "4",
            "-c",
            "2",
            "--timeout",
            "200ms",
            &url(&server, "/stall"),
        ],
        "timeout",
    );
}

/// A loop keeps one timer for all its requests and moves it to each new
/// deadline: a prompt server must see no timeout long after the first
/// request's deadline has passed, over each protocol's driver.
#[test]
fn a_loops_timer_follows_each_requests_deadline() {
    let server = target();
    for protocol in [None, Some("--http2")] {
        let mut args = vec!["run", "-d", "2500ms", "-c", "2", "--timeout", "1s"];
        args.extend(protocol);
        let path = url(&server, "/hi");
        args.push(&path);
        let (out, report) = volley_json(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let s = summary(&report);
        assert!(s["requests"].as_f64().unwrap() > 100.0, "{s}");
        assert_eq!(s["errors"], 0, "{protocol:?}: {s}");
    }
}

/// A connection that has answered many requests and then stalls (the
/// target pauses for 1.5 s) times its request out at the request timeout
/// from that request's own send: the loop's timer, still set for an
/// earlier request's deadline, must move on to this one's and fire then,
/// not let the request wait out the pause and count as a slow success.
#[test]
fn a_stall_after_many_answers_times_out_at_the_requests_own_deadline() {
    let _exclusive = exclusive();
    let server = target();
    let args = [
        "run",
        "-d",
        "3500ms",
        "-c",
        "2",
        "--timeout",
        "400ms",
        &url(&server, "/hi"),
    ];
    let (out, report) = paused_during(&server, Duration::from_millis(1200), 1500, || volley_json(&args));
    assert_no_panic(&out);
    let s = summary(&report);
    assert!(num(&s["ok"]) > 100.0, "answers before and after the pause: {s}");
    let timeouts = s["errors_by_kind"]["timeout"].as_f64().unwrap_or(0.0);
    // Each connection's request in flight times out, and so do the
    // requests of the new connections opened during the pause.
    assert!(timeouts >= 2.0, "{s}");
    let slowest = num(&s["latency_ms"]["max"]);
    assert!(
        slowest < 1000.0,
        "a request waited out the pause: {slowest} ms, {s}"
    );
}

#[test]
fn garbage_is_protocol_error() {
    let server = target();
    fault_kind(
        &["run", "-n", "20", "-c", "2", &url(&server, "/garbage")],
        "protocol",
    );
}

#[test]
fn closed_port_is_connect_error() {
    // Bind then close, so the port is known and nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = format!("http://127.0.0.1:{port}/");
    fault_kind(&["run", "-n", "20", "-c", "2", &dead], "connect");
}

#[test]
fn no_keepalive_opens_a_connection_per_request() {
    let server = target();
    let (out, report) = volley_json(&[
        "run",
        "-n",
        "300",
        "-c",
        "3",
        "--no-keepalive",
        &url(&server, "/hi"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(summary(&report)["ok"], 300);
    assert_eq!(report["plan"]["keepalive"], false);
    let stats = server.stats();
    assert_eq!(stats.connections_accepted, 300, "{stats:?}");
    assert_eq!(stats.requests_completed, 300, "{stats:?}");
}

#[test]
fn sleep_20_has_p50_near_20ms() {
    let _exclusive = timed();
    let server = target();
    let (out, report) = volley_json(&["run", "-n", "200", "-c", "10", &url(&server, "/sleep/20")]);
    assert!(out.status.success());
    let p50 = summary(&report)["latency_ms"]["p50"].as_f64().unwrap();
    assert!((20.0..=23.0).contains(&p50), "p50 {p50} ms");
}

#[test]
fn warmup_is_excluded_and_shown() {
    let server = target();
    let (out, report) = volley_json(&["run", "-w", "300", "-n", "500", "-c", "5", &url(&server, "/hi")]);
    assert!(out.status.success());
    let run = &report["runs"][0];
    assert_eq!(run["warmup"]["requests"], 300);
    assert_eq!(run["summary"]["requests"], 500);
    let series_total: u64 = run["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(series_total, 500, "the series holds measured requests only");
    assert_eq!(
        server.stats().requests_received,
        800,
        "both phases reached the target"
    );
    assert!(stdout(&out).contains("warm-up: 300 requests"), "{}", stdout(&out));
}

#[test]
fn warmup_by_duration() {
    let server = target();
    let (out, report) = volley_json(&[
        "run",
        "-w",
        "300ms",
        "-d",
        "500ms",
        "-c",
        "2",
        &url(&server, "/sleep/5"),
    ]);
    assert!(out.status.success());
    let warm = &report["runs"][0]["warmup"];
    assert!(warm["elapsed_s"].as_f64().unwrap() >= 0.3);
    assert!(warm["requests"].as_u64().unwrap() > 10);
    let elapsed = summary(&report)["elapsed_s"].as_f64().unwrap();
    assert!((0.45..0.8).contains(&elapsed), "measured phase {elapsed} s");
}

#[test]
fn report_matches_schema() {
    let server = target();
    let (out, report) = volley_json(&[
        "run",
        "-d",
        "1200ms",
        "--interval",
        "200ms",
        "-w",
        "50",
        "-c",
        "4",
        "-H",
        "X-A: 1",
        "-H",
        "b=2",
        "-m",
        "POST",
        "-b",
        "hello",
        &url(&server, "/echo"),
        &url(&server, "/status/404"),
    ]);
    assert_no_panic(&out);
    let problems = schema_violations(&report);
    assert!(problems.is_empty(), "schema violations: {problems:#?}");
    assert_eq!(report["runs"].as_array().unwrap().len(), 2, "one section per URL");
    let series = report["runs"][0]["series"].as_array().unwrap();
    assert!(series.len() >= 5, "200 ms intervals over 1.2 s: {series:?}");
    // The closed model: service time is the latency, not repeated per row.
    assert!(
        series.iter().all(|row| row.get("service").is_none()),
        "{series:?}"
    );
    // The body came back from /echo, so bytes include it.
    assert!(summary(&report)["bytes"].as_u64().unwrap() > 0);
    assert_eq!(report["plan"]["headers"][1][0], "b");
    // The histogram decodes and agrees with the summary.
    let hist = volley::report::histogram::decode(report["runs"][0]["histogram"].as_str().unwrap()).unwrap();
    assert_eq!(hist.len(), summary(&report)["ok"].as_u64().unwrap());
}

#[test]
fn json_on_stdout_replaces_text() {
    let server = target();
    let out = volley(&["run", "--json", "-n", "20", &url(&server, "/hi")]);
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).expect("stdout is only JSON");
    assert_eq!(report["schema"], "volley.report/1");
}

#[test]
fn several_urls_run_in_turn_with_delay() {
    let server = target();
    let started = Instant::now();
    let out = volley(&[
        "run",
        "-q",
        "-n",
        "20",
        "--delay",
        "400ms",
        &url(&server, "/hi"),
        &url(&server, "/bytes/10"),
    ]);
    assert!(out.status.success());
    assert!(started.elapsed() >= Duration::from_millis(400));
    let text = stdout(&out);
    assert_eq!(text.matches("summary").count(), 2, "{text}");
    assert!(text.find("/hi").unwrap() < text.find("/bytes/10").unwrap());
}

/// One clear line on stderr and exit code 2.
fn usage_error(args: &[&str], needle: &str) {
    let out = volley(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_usage_exits_2_with_one_line() {
    usage_error(&["run", "--connections", "many", "http://127.0.0.1:1/"], "many");
    usage_error(&["run", "--bogus", "http://127.0.0.1:1/"], "--bogus");
    usage_error(&["run", "ftp://127.0.0.1/"], "unsupported scheme");
    usage_error(&["run", "not a url"], "invalid URL");
    usage_error(&["run", "-d", "soon", "http://127.0.0.1:1/"], "--duration");
    usage_error(&["run", "-H", "nocolon", "http://127.0.0.1:1/"], "invalid header");
    usage_error(&["run", "--status", "abc", "http://127.0.0.1:1/"], "--status");
    usage_error(
        &[
            "run",
            "--body-file",
            "/nonexistent/body.bin",
            "http://127.0.0.1:1/",
        ],
        "cannot read --body-file",
    );
    usage_error(&["run", "-c", "0", "http://127.0.0.1:1/"], "--connections");
    usage_error(&["run"], "URL");
    // An optional value goes after '=': the error shows that form.
    usage_error(
        &["run", "--dashboard", "127.0.0.1:5665", "http://127.0.0.1:1/"],
        "write --dashboard=127.0.0.1:5665",
    );
    usage_error(
        &[
            "step",
            "--levels",
            "1",
            "--dashboard",
            "[::1]:0",
            "http://127.0.0.1:1/",
        ],
        "--dashboard takes its value after '=', as --dashboard=ADDR",
    );
}

#[test]
fn body_file_is_sent() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.txt");
    std::fs::write(&body, "x".repeat(1000)).unwrap();
    let (out, report) = volley_json(&[
        "run",
        "-n",
        "10",
        "-m",
        "post",
        "--body-file",
        body.to_str().unwrap(),
        &url(&server, "/echo"),
    ]);
    assert!(out.status.success());
    // Each echoed response carries the 1000-byte body back.
    assert!(summary(&report)["bytes"].as_u64().unwrap() >= 10 * 1000);
    assert_eq!(report["plan"]["method"], "POST");
}

#[cfg(unix)]
#[test]
fn sigint_still_reports() {
    let _exclusive = timed();
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("interrupted.json");
    let child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args([
            "run",
            "-d",
            "30s",
            "-c",
            "4",
            "--output",
            path.to_str().unwrap(),
            &url(&server, "/sleep/5"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let started = Instant::now();
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "stopped promptly");
    assert_eq!(out.status.code(), Some(130));
    assert!(stdout(&out).contains("summary (interrupted)"), "{}", stdout(&out));
    let report = read_report(&path);
    assert_eq!(report["interrupted"], true);
    let s = summary(&report);
    assert!(s["requests"].as_u64().unwrap() > 100, "{s}");
    assert!((1.0..5.0).contains(&s["elapsed_s"].as_f64().unwrap()));
}

#[test]
fn pipelining_keeps_the_count_exact() {
    let server = target();
    let (out, report) = volley_json(&[
        "run",
        "-n",
        "1003",
        "-c",
        "4",
        "--pipeline",
        "8",
        &url(&server, "/hi"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(summary(&report)["ok"], 1003);
    assert_eq!(report["plan"]["pipeline"], 8);
    assert_eq!(server.stats().requests_completed, 1003);
    assert_eq!(server.stats().connections_accepted, 4);
}

#[test]
fn pipelined_large_bodies_are_not_mistaken_for_early_answers() {
    // The server answers the first request of a round while volley still
    // writes the later ones: that is pipelining, not an early answer.
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.bin");
    std::fs::write(&body, vec![0xfe; 4 << 20]).unwrap();
    let (out, report) = volley_json(&[
        "run",
        "-n",
        "16",
        "-c",
        "1",
        "--pipeline",
        "4",
        "-m",
        "POST",
        "--body-file",
        body.to_str().unwrap(),
        &url(&server, "/hi"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(summary(&report)["ok"], 16, "{}", summary(&report));
    assert_eq!(server.stats().connections_accepted, 1);
}

#[test]
fn pipelining_needs_keepalive() {
    usage_error(
        &["run", "--pipeline", "4", "--no-keepalive", "http://127.0.0.1:1/"],
        "--pipeline",
    );
}

/// Every connection carries load: by Little's law, C busy connections give
/// rate x mean latency = C. (When one worker's 2,000 connection loops shared
/// tokio's cooperative budget, most of them sat starved and the product fell
/// far below C.) Without batches: a worker that waits for them times each
/// response by the kernel's receive stamp, so its latency leaves out the
/// time a response waited for the busy worker, which the law counts.
#[test]
fn every_connection_carries_load() {
    let _exclusive = exclusive();
    let server = target();
    let (out, report) = volley_json(&[
        "run",
        "--no-batch",
        "-c",
        "2000",
        "-t",
        "1",
        "-d",
        "1500ms",
        &url(&server, "/hi"),
    ]);
    assert!(out.status.success());
    let s = summary(&report);
    let in_flight = s["rps"].as_f64().unwrap() * s["latency_ms"]["mean"].as_f64().unwrap() / 1000.0;
    assert!(
        in_flight > 0.7 * 2000.0,
        "only {in_flight:.0} of 2000 connections were busy: {s}"
    );
    assert_eq!(server.stats().connections_accepted, 2000);
}

/// Runs volley with the given open-files limits.
#[cfg(unix)]
fn volley_with_nofile(soft: u64, hard: u64, args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_volley"));
    cmd.args(args).stdin(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe; it runs in the child before exec.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: soft as libc::rlim_t,
                rlim_max: hard as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().unwrap()
}

#[cfg(unix)]
#[test]
fn open_files_limit_is_raised_or_reported_before_starting() {
    let server = target();
    let hi = url(&server, "/hi");
    // 300 connections do not fit a soft limit of 64 but fit the hard 1024.
    let out = volley_with_nofile(64, 1024, &["run", "-n", "600", "-c", "300", &hi]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(server.stats().connections_accepted, 300);
    // 2,000 cannot fit at all: one line, and no connection was opened.
    let out = volley_with_nofile(64, 1024, &["run", "-n", "600", "-c", "2000", &hi]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("open files") && err.contains("1024"), "{err}");
    assert_eq!(server.stats().connections_accepted, 300, "nothing started");
}

#[test]
fn a_framing_header_that_contradicts_the_body_is_a_usage_error() {
    for (header, body) in [
        ("Content-Length: 2", "hello"),
        ("content-length: 50", "hello"),
        ("Transfer-Encoding: chunked", "5\r\nhello\r\n0\r\n\r\n"),
    ] {
        let out = volley(&[
            "run",
            "-n",
            "1",
            "-m",
            "POST",
            "-H",
            header,
            "-b",
            body,
            "http://127.0.0.1:9/",
        ]);
        assert_eq!(out.status.code(), Some(2), "{header}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("drop the header"), "{err}");
    }
    // A length that matches is the user's to send.
    let server = target();
    let out = volley(&[
        "run",
        "-n",
        "3",
        "-c",
        "1",
        "-q",
        "-m",
        "POST",
        "-H",
        "Content-Length: 5",
        "-b",
        "hello",
        &url(&server, "/echo"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));

    // A plan's framing header is checked when the plan is loaded.
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("framing.yml");
    std::fs::write(
        &plan,
        "plan:\n  - name: Post\n    request:\n      url: /echo\n      method: POST\n      body: '{{ iteration }}'\n      headers:\n        Content-Length: '1'\n",
    )
    .unwrap();
    let out = volley(&["plan", plan.to_str().unwrap(), "--base", &url(&server, "")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("drop the header"), "{}", stderr(&out));
}

/// A large `--body-file` is held once as the plan's body and once encoded
/// with its request head, not copied again for the report or for a
/// pipeline of one (it peaked at four times its size before).
#[test]
fn a_large_body_file_is_held_twice_not_four_times() {
    let _serial = exclusive();
    const BODY: usize = 32 << 20;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("body.bin");
    // Not UTF-8, so the report names its size rather than quoting it.
    std::fs::write(&path, vec![0xff; BODY]).unwrap();
    let server = target();
    let (out, report) = volley_json(&[
        "run",
        "-n",
        "4",
        "-c",
        "1",
        "-q",
        "-m",
        "POST",
        "--body-file",
        path.to_str().unwrap(),
        &url(&server, "/echo"),
    ]);
    let s = summary(&report);
    assert_eq!(s["ok"], 4, "{}", stderr(&out));
    let peak = super::support::num(&s["tool_cpu"]["peak_rss_bytes"]);
    assert!(
        peak > (2 * BODY) as f64 && peak < (2 * BODY + (24 << 20)) as f64,
        "peak RSS {peak} bytes for a {BODY}-byte body"
    );
}

/// A report file that cannot be written is found before the load starts:
/// one line, exit 2, and the target sees no request (the report is not
/// lost at the end of a long run).
#[test]
fn an_unwritable_output_is_refused_before_any_request() {
    let server = target();
    let url = url(&server, "/");
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("kept.json");
    std::fs::write(&kept, "as it was").unwrap();
    let kept = kept.to_str().unwrap();
    for (command, flag) in [
        ("run", "-o"),
        ("run", "--html"),
        ("run", "--stream"),
        ("step", "-o"),
        ("step", "--html"),
    ] {
        let mut args = vec![command, flag, "/nonexistent/dir/x.json"];
        if command == "step" {
            args.extend(["--levels", "1,2", "--step-duration", "1s"]);
        } else {
            args.extend(["-c", "2", "-d", "1s"]);
        }
        // A file that can be written beside the one that cannot: left as it was.
        if flag != "-o" {
            args.extend(["-o", kept]);
        }
        args.push(&url);
        usage_error(
            &args,
            &format!("{flag} '/nonexistent/dir/x.json' cannot be written"),
        );
    }
    let out = volley(&["merge", "-o", "/nonexistent/dir/x.json", kept]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("-o '/nonexistent/dir/x.json' cannot be written"));
    assert_eq!(server.stats().connections_accepted, 0);
    assert_eq!(server.stats().requests_received, 0);
    assert_eq!(std::fs::read_to_string(kept).unwrap(), "as it was");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing left behind"
    );
}

/// A run where nothing succeeded shows no latency figures (dashes, not
/// 0.000) and its rate as attempts, not as answered requests.
#[test]
fn a_run_where_nothing_succeeded_shows_no_latency() {
    let url = format!("http://127.0.0.1:{}/", super::receivers::free_port());
    let out = volley(&["run", "-d", "500ms", "-c", "2", "--interval", "100ms", &url]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    let line = |start: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("no '{start}' line in:\n{text}"))
            .to_string()
    };
    assert_eq!(line("min "), "  min -   mean -   stdev -   max -", "{text}");
    assert_eq!(line("p50 "), "  p50 -   p75 -   p90 -   p95 -");
    assert_eq!(line("p99 "), "  p99 -   p99.9 -   p99.99 -");
    let throughput = line("throughput");
    assert!(
        throughput.contains("0 responses/s") && throughput.contains("attempts/s"),
        "{throughput}"
    );
    assert!(!throughput.contains("req/s"), "{throughput}");
    // Each interval of the log: dashes where the latency columns were.
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("p50 ms"))
        .skip(1)
        .take_while(|l| !l.starts_with("summary"))
        .collect();
    assert!(!rows.is_empty(), "{text}");
    for row in rows {
        let columns: Vec<&str> = row.split_whitespace().rev().take(4).collect();
        assert_eq!(columns, ["-", "-", "-", "-"], "{row}");
    }
}

/// `host:port/path` without a scheme is read as `http://`, as curl reads
/// it, with a note on stderr.
#[test]
fn a_url_without_a_scheme_is_read_as_http() {
    let server = target();
    let port = server.addr().port();
    for host in ["127.0.0.1", "localhost"] {
        let given = format!("{host}:{port}/hi");
        let out = volley(&["run", "-n", "10", "-c", "1", "-q", &given]);
        assert!(out.status.success(), "{given}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("note: no scheme given: read as http://{given}")),
            "{}",
            stderr(&out)
        );
        assert!(stdout(&out).contains("10 ok"), "{}", stdout(&out));
    }
}

/// A dead target is not hammered: under the closed model each refused
/// connect waits before the next try (doubling to a second), so a 2 s run
/// at -c 4 makes a few dozen tries, not hundreds of thousands, each counted
/// as an error; the report says how long connections were refused.
#[test]
fn a_dead_target_is_tried_with_backoff_and_its_refused_time_reported() {
    let _timed = timed();
    let url = format!("http://127.0.0.1:{}/", super::receivers::free_port());
    let started = Instant::now();
    let (out, report) = volley_json(&["run", "-d", "2s", "-c", "4", "-t", "2", &url]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the run kept to its deadline"
    );
    let s = summary(&report);
    let tries = s["errors"].as_u64().unwrap();
    assert_eq!(s["errors_by_kind"]["connect"].as_u64(), Some(tries), "{s}");
    assert!(
        (4..=300).contains(&tries),
        "{tries} connect attempts in 2 s at -c 4"
    );
    let refused = num(&s["refused_s"]);
    assert!(
        (1.5..=2.2).contains(&refused),
        "refused for {refused} s of {}",
        s["elapsed_s"]
    );
    assert!(
        schema_violations(&report).is_empty(),
        "{:?}",
        schema_violations(&report)
    );
    let out = volley(&["run", "-d", "1s", "-c", "2", &url]);
    assert!(
        stdout(&out).contains("connections refused for"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_body_at_file_is_read_from_the_file_as_curl_reads_it() {
    let server = super::support::logging_target();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("body.json");
    std::fs::write(&file, "{\"a\": 1}").unwrap();
    let at = format!("@{}", file.display());
    let target = format!("http://{}/echo", server.addr());
    let out = volley(&[
        "run", "-n", "1", "-c", "1", "-q", "-m", "POST", "-b", &at, &target,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let sent = server.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body, b"{\"a\": 1}", "the file's bytes, not '{at}'");
    let missing = format!("@{}", dir.path().join("nope.json").display());
    let out = volley(&["run", "-n", "1", "-q", "-b", &missing, &target]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let message = stderr(&out);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(
        message.contains(&format!("cannot read -b {missing}")),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1, "nothing sent");
}
