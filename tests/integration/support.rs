//! Helpers the integration tests share: the embedded target on 127.0.0.1
//! port 0, and the volley binary run with a time limit, its JSON report read
//! back.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use volley::server::{ServerHandle, ServerOptions, StatsSnapshot, spawn};

/// No single invocation in these tests may run longer than this.
const LIMIT: Duration = Duration::from_secs(90);

pub fn target() -> ServerHandle {
    target_with(None)
}

/// The embedded target, optionally handling at most `max_inflight` requests at once.
pub fn target_with(max_inflight: Option<usize>) -> ServerHandle {
    spawn(ServerOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        max_inflight,
        ..Default::default()
    })
    .expect("embedded target starts")
}

/// Waits until `check` holds for the server's counters (they are updated
/// by the server's threads, a moment after the client sees the bytes), or
/// 5 s have passed; returns the last counters seen.
pub fn wait_for_stats(server: &ServerHandle, check: impl Fn(&StatsSnapshot) -> bool) -> StatsSnapshot {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stats = server.stats();
        if check(&stats) || Instant::now() > deadline {
            return stats;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `run` while another thread pauses `server` for `pause_ms` (the
/// target's `/pause` endpoint), `after` the first request that arrives once
/// `run` has begun: the stall falls inside the run however long its process
/// took to start on a busy machine.
pub fn paused_during<T>(server: &ServerHandle, after: Duration, pause_ms: u64, run: impl FnOnce() -> T) -> T {
    let before = server.stats().requests_received;
    std::thread::scope(|scope| {
        scope.spawn(|| {
            wait_for_stats(server, |stats| stats.requests_received > before);
            std::thread::sleep(after);
            pause(server.addr(), pause_ms);
        });
        run()
    })
}

/// Asks the server at `addr` to pause for `pause_ms`; returns once the
/// pause has ended (its answer comes then).
fn pause(addr: std::net::SocketAddr, pause_ms: u64) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let request = format!("GET /pause/{pause_ms} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
}

pub fn url(server: &ServerHandle, path: &str) -> String {
    format!("http://{}{path}", server.addr())
}

/// Runs the binary to completion, killing it if it outlives the limit. The
/// output is read while it runs, so a long report cannot fill the pipe.
pub fn volley(args: &[&str]) -> Output {
    volley_env(args, &[])
}

/// [`volley`] with these environment variables set for it.
pub fn volley_env(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(args)
        .envs(vars.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("volley binary starts");
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            // SAFETY: signals our own child process.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("volley {args:?} ran longer than {LIMIT:?}");
        }
    }
}

/// Runs with `--output` and returns the process output and the parsed report.
pub fn volley_json(args: &[&str]) -> (Output, Value) {
    volley_json_env(args, &[])
}

/// [`volley_json`] with these environment variables set for it.
pub fn volley_json_env(args: &[&str], vars: &[(&str, &str)]) -> (Output, Value) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    let path_str = path.to_str().unwrap().to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--output", &path_str]);
    let out = volley_env(&all, vars);
    if !path.exists() {
        panic!("no report from volley {args:?}: {}", stderr(&out));
    }
    (out, read_report(&path))
}

pub fn read_report(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("the JSON report was written");
    serde_json::from_str(&text).expect("the JSON report parses")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The summary of the first run of a report.
pub fn summary(report: &Value) -> &Value {
    &report["runs"][0]["summary"]
}

/// Where a report breaks `schema/report-v1.json`, one line each (none: valid).
pub fn schema_violations(report: &Value) -> Vec<String> {
    let schema: Value = serde_json::from_str(include_str!("../../schema/report-v1.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    validator
        .iter_errors(report)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// Checks a 1 s run of 20 streams on one connection against `/sleep/100`
/// (`what` names it): the streams ran side by side (160 to 200 answers)
/// and each took the target's 100 ms (p50 100 to 130 ms).
pub fn assert_twenty_streams_of_100ms(report: &Value, what: &str) {
    let ok = num(&summary(report)["ok"]);
    assert!((160.0..=200.0).contains(&ok), "{what}: {ok} requests in 1 s");
    let p50 = num(&summary(report)["latency_ms"]["p50"]);
    assert!((100.0..130.0).contains(&p50), "{what}: p50 {p50} ms");
}

/// A JSON number, or a panic naming what was there.
pub fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Taken alone (no [`timed`] test beside it) by the tests that load the
/// machine hard: floods, browsers, high-rate runs, spawned collectors.
/// The test harness runs tests on parallel threads and CI has two cores,
/// so a timing figure measured beside one of these would measure it.
pub fn exclusive() -> std::sync::RwLockWriteGuard<'static, ()> {
    // A test that failed while holding it must not fail all the others.
    LOAD.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Taken, shared, by the tests whose figures depend on timing (rates,
/// schedules, knees, timeouts) but that use little CPU themselves: they run
/// beside each other, never beside an [`exclusive`] one. (Measured: each
/// of them keeps under a third of a core busy, mostly waiting on a slow or
/// silent target, apart from runs of a few milliseconds.)
pub fn timed() -> std::sync::RwLockReadGuard<'static, ()> {
    LOAD.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Between the [`exclusive`] tests and the [`timed`] ones. On Linux the
/// standard library's lock prefers writers (one waiting holds new readers
/// back), so a stream of timed tests never starves a heavy one.
static LOAD: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// The embedded target on a free loopback port, logging the requests it
/// answers (`ServerHandle::requests`).
pub fn logging_target() -> volley::server::ServerHandle {
    volley::server::spawn(volley::server::ServerOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        log_requests: true,
        ..Default::default()
    })
    .expect("embedded target starts")
}

/// A loopback port free for both UDP (QUIC) and TCP (HTTP/3 servers also
/// listen there for HTTP/1.1 and HTTP/2).
pub fn free_udp_and_tcp_port() -> u16 {
    loop {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}
