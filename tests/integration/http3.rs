//! volley's HTTP/3 client against the embedded target's HTTP/3 (quinn and
//! the h3 crates, an independent implementation of both QUIC and HTTP/3):
//! exact counts over many streams, bodies both ways, the open model, plans
//! and step, failures by kind, and targets that never answer.

use super::support::{
    assert_twenty_streams_of_100ms, exclusive, num, schema_violations, stderr, summary, timed, volley,
    volley_json, wait_for_stats,
};
use serde_json::Value;
use std::time::{Duration, Instant};
use volley::server::{ServerHandle, ServerOptions, spawn};

pub(super) fn h3_target() -> ServerHandle {
    spawn(ServerOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        tls: true,
        http3: true,
        ..Default::default()
    })
    .expect("embedded HTTP/3 target starts")
}

pub(super) fn h3_url(server: &ServerHandle, path: &str) -> String {
    format!("https://{}{path}", server.addr())
}

/// Runs volley (`args`: the command and its flags, `--http3` among them)
/// and checks what every successful HTTP/3 invocation holds: it exited 0,
/// its report is valid, and each of its runs spoke `h3`. Returns the report.
pub(super) fn h3_ok(args: &[&str]) -> Value {
    let (out, report) = volley_json(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let problems = schema_violations(&report);
    assert!(problems.is_empty(), "{problems:?}");
    let protocols: Vec<&Value> = report["runs"]
        .as_array()
        .expect("a report has runs")
        .iter()
        .map(|run| &run["protocol"])
        .collect();
    assert!(
        !protocols.is_empty() && protocols.iter().all(|p| *p == "h3"),
        "{protocols:?}"
    );
    report
}

/// `volley run --http3 --insecure -q` with `args` (the URL among them),
/// checked by [`h3_ok`].
pub(super) fn h3_run(args: &[&str]) -> Value {
    let mut all = vec!["run", "--http3", "--insecure", "-q"];
    all.extend_from_slice(args);
    h3_ok(&all)
}

#[test]
fn requests_over_many_streams_are_counted_exactly() {
    let server = h3_target();
    let report = h3_run(&["-n", "3000", "-c", "3", "--streams", "8", &h3_url(&server, "/hi")]);
    let s = summary(&report);
    assert_eq!(num(&s["ok"]), 3000.0, "{s}");
    assert_eq!(num(&s["errors"]), 0.0);
    let stats = wait_for_stats(&server, |s| s.requests_completed >= 3000);
    assert_eq!(stats.requests_completed, 3000);
    assert_eq!(stats.h3_connections, 3, "three QUIC connections, one per -c");
    assert_eq!(stats.h2_connections + stats.http1_connections, 0);
    // QUIC's handshake is counted as TLS's is.
    let tls = &s["tls"];
    assert_eq!(num(&tls["handshakes"]), 3.0, "{tls}");
}

/// `--coalesce` over HTTP/3: a connection's streams go out in rounds,
/// every request still counted (-n exact with a last round that is not
/// full), latency from each round's send (a 100 ms target reads 100 ms),
/// more lanes than the server's stream limit and large responses still
/// finish.
#[test]
fn coalesced_streams_go_out_in_rounds_over_http3_too() {
    let _alone = timed();
    let server = h3_target();
    let report = h3_run(&[
        "-n",
        "3001",
        "-c",
        "3",
        "--streams",
        "8",
        "--coalesce",
        &h3_url(&server, "/hi"),
    ]);
    assert_eq!(report["plan"]["coalesce"], true);
    assert_eq!(num(&summary(&report)["ok"]), 3001.0);
    let stats = wait_for_stats(&server, |s| s.requests_completed >= 3001);
    assert_eq!(stats.requests_completed, 3001);

    let report = h3_run(&[
        "-c",
        "1",
        "--streams",
        "20",
        "--coalesce",
        "-d",
        "1s",
        &h3_url(&server, "/sleep/100"),
    ]);
    assert_twenty_streams_of_100ms(&report, "coalesced");

    let report = h3_run(&[
        "-n",
        "2000",
        "-c",
        "1",
        "--streams",
        "300",
        "--coalesce",
        &h3_url(&server, "/hi"),
    ]);
    assert_eq!(num(&summary(&report)["ok"]), 2000.0);

    // Megabyte responses need acknowledgements while they arrive: none
    // may wait for the round (the server's congestion window would stall
    // until the request timeout).
    let started = Instant::now();
    let report = h3_run(&[
        "-n",
        "40",
        "-c",
        "1",
        "--streams",
        "4",
        "--coalesce",
        "--timeout",
        "5s",
        &h3_url(&server, "/bytes/1000000"),
    ]);
    assert_eq!(num(&summary(&report)["ok"]), 40.0);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

/// More lanes than the server allows streams (it allows 256): the rest
/// wait for room on the connection, and every request is still answered.
#[test]
fn lanes_beyond_the_servers_stream_limit_wait_for_room() {
    let server = h3_target();
    let report = h3_run(&[
        "-n",
        "3000",
        "-c",
        "1",
        "--streams",
        "300",
        "--timeout",
        "10s",
        &h3_url(&server, "/sleep/2"),
    ]);
    let s = summary(&report);
    assert_eq!(num(&s["ok"]), 3000.0, "{s}");
    assert_eq!(
        wait_for_stats(&server, |s| s.requests_completed >= 3000).h3_connections,
        1
    );
}

#[test]
fn a_large_upload_and_large_responses_arrive_whole() {
    let server = h3_target();
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.bin");
    std::fs::write(&body, vec![b'v'; 1024 * 1024]).unwrap();
    let report = h3_run(&[
        "-m",
        "POST",
        "--body-file",
        body.to_str().unwrap(),
        "-n",
        "20",
        "-c",
        "2",
        &h3_url(&server, "/echo"),
    ]);
    let s = summary(&report);
    assert_eq!(num(&s["ok"]), 20.0, "{s}");
    // Every echo came back whole: a megabyte each, plus framing.
    let received = num(&s["bytes"]);
    assert!(received >= 20.0 * 1024.0 * 1024.0, "{received} bytes");
    let report = h3_run(&[
        "-n",
        "200",
        "-c",
        "2",
        "--streams",
        "4",
        &h3_url(&server, "/bytes/100000"),
    ]);
    let s = summary(&report);
    assert_eq!(num(&s["ok"]), 200.0, "{s}");
    assert!(num(&s["bytes"]) >= 200.0 * 100_000.0, "{s}");
}

#[test]
fn the_open_model_runs_over_http3() {
    let _alone = timed();
    let server = h3_target();
    let report = h3_run(&[
        "-R",
        "500",
        "-d",
        "2s",
        "-c",
        "2",
        "--streams",
        "4",
        &h3_url(&server, "/hi"),
    ]);
    let s = summary(&report);
    assert_eq!(num(&s["errors"]), 0.0, "{s}");
    let ok = num(&s["ok"]);
    assert!((900.0..=1100.0).contains(&ok), "{ok} requests at 500/s for 2 s");
}

#[test]
fn a_plan_and_step_run_over_http3() {
    let server = h3_target();
    let report = h3_ok(&[
        "plan",
        "examples/plans/login-and-browse.yml",
        "--base",
        &h3_url(&server, ""),
        "--http3",
        "--insecure",
        "--streams",
        "2",
        "-q",
    ]);
    let s = summary(&report);
    // Its cookies, captured values and asserts all held.
    assert_eq!(num(&s["errors"]), 0.0, "{s}");
    assert!(num(&s["ok"]) > 50.0, "{s}");
    let report = h3_ok(&[
        "step",
        "--http3",
        "--insecure",
        "--levels",
        "1,2",
        "--step-duration",
        "400ms",
        &h3_url(&server, "/hi"),
    ]);
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| num(&r["summary"]["ok"]) > 50.0));
}

#[test]
fn http3_failures_keep_their_kinds() {
    let server = h3_target();
    let (_, report) = volley_json(&[
        "run",
        "--http3",
        "--insecure",
        "-n",
        "40",
        "-c",
        "2",
        "-q",
        &h3_url(&server, "/status/503"),
    ]);
    assert_eq!(summary(&report)["errors_by_kind"]["status"], 40);
    // /drop closes the QUIC connection under the stream: a reset, named.
    let (_, report) = volley_json(&[
        "run",
        "--http3",
        "--insecure",
        "-n",
        "10",
        "-c",
        "1",
        "-q",
        &h3_url(&server, "/drop"),
    ]);
    let s = summary(&report);
    assert_eq!(num(&s["errors_by_kind"]["reset"]), 10.0, "{s}");
    assert!(
        s["error_examples"].to_string().contains("H3_INTERNAL_ERROR"),
        "{s}"
    );
    // A timeout per stalled stream, and the connection goes on.
    let (_, report) = volley_json(&[
        "run",
        "--http3",
        "--insecure",
        "-n",
        "4",
        "-c",
        "2",
        "--timeout",
        "300ms",
        "-q",
        &h3_url(&server, "/stall"),
    ]);
    assert_eq!(num(&summary(&report)["errors_by_kind"]["timeout"]), 4.0);
}

#[test]
fn an_untrusted_certificate_fails_the_handshake_as_tls() {
    let server = h3_target();
    let (out, report) = volley_json(&[
        "run",
        "--http3",
        "-n",
        "3",
        "-c",
        "1",
        "-q",
        &h3_url(&server, "/hi"),
    ]);
    assert!(!out.status.success());
    let s = summary(&report);
    assert_eq!(num(&s["errors_by_kind"]["tls"]), 3.0, "{s}");
}

/// A UDP port that takes datagrams and never answers (a firewall that
/// drops QUIC), and one where nothing listens: both end within the connect
/// timeout with a connect error that says why.
#[test]
fn silent_and_closed_ports_fail_as_connect_errors_within_the_timeout() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let began = Instant::now();
    let (out, report) = volley_json(&[
        "run",
        "--http3",
        "--insecure",
        "-n",
        "2",
        "-c",
        "1",
        "--connect-timeout",
        "1s",
        "-q",
        &format!("https://{}/hi", silent.local_addr().unwrap()),
    ]);
    assert!(!out.status.success());
    assert!(began.elapsed() < Duration::from_secs(10), "{:?}", began.elapsed());
    let s = summary(&report);
    assert_eq!(num(&s["errors_by_kind"]["connect"]), 2.0, "{s}");
    // The datagrams did reach the port: a QUIC Initial, padded to 1200 bytes.
    let mut buf = [0u8; 2048];
    silent.set_nonblocking(true).unwrap();
    let (n, _) = silent.recv_from(&mut buf).expect("an Initial arrived");
    assert!(n >= 1200, "{n}");
    drop(silent);

    let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let began = Instant::now();
    let (out, report) = volley_json(&[
        "run",
        "--http3",
        "--insecure",
        "-n",
        "2",
        "-c",
        "1",
        "-q",
        &format!("https://{addr}/hi"),
    ]);
    assert!(!out.status.success());
    assert!(began.elapsed() < Duration::from_secs(5), "{:?}", began.elapsed());
    let s = summary(&report);
    assert_eq!(num(&s["errors_by_kind"]["connect"]), 2.0, "{s}");
    assert!(s["error_examples"].to_string().contains("refused"), "{s}");
}

/// Flags HTTP/3 cannot take, and `--0rtt` without HTTP/3 or without
/// resumption: each a usage error in one line.
#[test]
fn http3_needs_https_and_takes_no_pipelining() {
    for args in [
        &["run", "--0rtt", "-n", "1", "https://127.0.0.1:9/"][..],
        &[
            "run",
            "--http3",
            "--0rtt",
            "--no-tls-resume",
            "-n",
            "1",
            "https://127.0.0.1:9/",
        ],
        &["run", "--http3", "-n", "1", "http://127.0.0.1:9/"],
        &[
            "run",
            "--http3",
            "--pipeline",
            "4",
            "-n",
            "1",
            "https://127.0.0.1:9/",
        ],
        &["run", "--http3", "--http2", "-n", "1", "https://127.0.0.1:9/"],
    ] {
        let out = volley(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    let out = volley(&["serve", "--http3", "--addr", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// `volley serve --tls --http3` as a process of its own on `port`, killed
/// when dropped.
struct ServeProcess(std::process::Child);

impl ServeProcess {
    fn start(port: u16) -> ServeProcess {
        // The port is free only from the moment the crashed server is
        // reaped, and another test's socket may take it then (an outgoing
        // connection's ephemeral port): that server would fail to bind, so
        // it is tried again for a while. Any other failure fails the test.
        let mut tries = 0;
        loop {
            match ServeProcess::try_start(port) {
                Ok(server) => return server,
                Err(said) if said.contains("Address already in use") && tries < 40 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(25));
                }
                Err(said) => panic!("volley serve on port {port} did not start: {said}"),
            }
        }
    }

    /// One start; what the server said if it did not come up.
    fn try_start(port: u16) -> Result<ServeProcess, String> {
        use std::io::BufRead;
        // Its error output goes to a file, read if it fails to start: a
        // pipe nobody reads could fill and stall the server.
        let mut errors = tempfile::tempfile().unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_volley"))
            .args([
                "serve",
                "--tls",
                "--http3",
                "--addr",
                &format!("127.0.0.1:{port}"),
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(errors.try_clone().unwrap())
            .spawn()
            .expect("volley serve starts");
        let mut server = ServeProcess(child);
        let mut line = String::new();
        std::io::BufReader::new(server.0.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        if line.contains("HTTP/3") {
            return Ok(server);
        }
        use std::io::{Read, Seek};
        server.crash();
        let mut said = String::new();
        errors.rewind().unwrap();
        errors.read_to_string(&mut said).unwrap();
        Err(format!("{line:?}, error output: {said:?}"))
    }

    /// Ends it as a crash would: no CONNECTION_CLOSE goes out.
    fn crash(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        self.crash();
    }
}

/// `volley run --http3 --insecure -q` with `args` against `path` of a
/// `volley serve --tls --http3` process that crashes after `crash_ms` and
/// comes back on the same port at once; the run's report. Alone: the
/// timing matters.
pub(super) fn run_across_a_restart(args: &[&str], path: &str, crash_ms: u64) -> Value {
    let _alone = exclusive();
    let port = super::support::free_udp_and_tcp_port();
    let mut first = ServeProcess::start(port);
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["run", "--http3", "--insecure", "-q"])
        .args(args)
        .arg("--output")
        .arg(&report)
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("volley run starts");
    std::thread::sleep(Duration::from_millis(crash_ms));
    first.crash();
    let _second = ServeProcess::start(port);
    let out = run.wait_with_output().unwrap();
    assert!(out.status.code().is_some(), "volley run ended by itself");
    super::support::read_report(&report)
}

/// A server that crashes and comes back on the same port no longer knows
/// the connections: it answers their packets with a stateless reset. The
/// streams cut by it fail as resets that say so, and the run goes on with
/// new connections to the new server.
#[test]
fn a_stateless_reset_after_a_server_restart_is_a_reset_and_the_run_goes_on() {
    let report = run_across_a_restart(&["-c", "2", "-d", "3s", "--timeout", "2s"], "/sleep/20", 1000);
    let s = summary(&report);
    assert!(num(&s["errors_by_kind"]["reset"]) >= 1.0, "{s}");
    assert!(s["error_examples"].to_string().contains("stateless reset"), "{s}");
    // Requests went on against the new server: many more than the first
    // second's and the cut ones.
    assert!(num(&s["ok"]) > 60.0, "{s}");
    let tls = &s["tls"];
    assert!(
        num(&tls["handshakes"]) >= 4.0,
        "new connections after the reset: {tls}"
    );
}
