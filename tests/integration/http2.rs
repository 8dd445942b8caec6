//! volley's HTTP/2 client against the embedded target: h2c by prior
//! knowledge, h2 chosen by ALPN over TLS, streams really concurrent, every
//! load model over the one request loop, and failures kept apart by kind.

use super::support::{
    assert_twenty_streams_of_100ms, exclusive, num, stderr, summary, target, timed, url, volley, volley_json,
    wait_for_stats,
};
use volley::server::{ServerHandle, ServerOptions, spawn};

fn tls_target() -> ServerHandle {
    spawn(ServerOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        tls: true,
        ..Default::default()
    })
    .expect("embedded TLS target starts")
}

fn tls_url(server: &ServerHandle, path: &str) -> String {
    format!("https://{}{path}", server.addr())
}

#[test]
fn h2c_with_prior_knowledge_is_reported() {
    let server = target();
    let (out, report) = volley_json(&[
        "run",
        "--http2",
        "-n",
        "600",
        "-c",
        "2",
        "--streams",
        "4",
        "-q",
        &url(&server, "/hi"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["runs"][0]["protocol"], "h2c");
    assert_eq!(report["plan"]["streams"], 4);
    let s = summary(&report);
    assert_eq!(num(&s["ok"]), 600.0);
    // Two connections of four streams, every request counted by the target.
    let stats = wait_for_stats(&server, |s| s.requests_completed >= 600);
    assert_eq!(stats.requests_completed, 600);
    assert_eq!(stats.h2_connections, 2);
    assert_eq!(stats.http1_connections, 0);
}

#[test]
fn https_negotiates_h2_by_alpn_and_http1_1_forces_http1() {
    let server = tls_target();
    let target_url = tls_url(&server, "/hi");
    let (out, report) = volley_json(&["run", "--insecure", "-n", "300", "-c", "3", "-q", &target_url]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["runs"][0]["protocol"], "h2");
    assert_eq!(num(&summary(&report)["ok"]), 300.0);
    let (out, report) = volley_json(&[
        "run",
        "--insecure",
        "--http1.1",
        "-n",
        "300",
        "-c",
        "3",
        "-q",
        &target_url,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["runs"][0]["protocol"], "http/1.1");
    assert_eq!(num(&summary(&report)["ok"]), 300.0);
    let (out, report) = volley_json(&[
        "run",
        "--insecure",
        "--http2",
        "-n",
        "300",
        "-c",
        "3",
        "--streams",
        "5",
        "-q",
        &target_url,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["runs"][0]["protocol"], "h2");
    assert_eq!(num(&summary(&report)["ok"]), 300.0);
    // Three connections, each one TLS handshake, timed in the report.
    let tls = &summary(&report)["tls"];
    assert_eq!(tls["handshakes"], 3, "{tls}");
    assert!(num(&tls["handshake_ms"]["max"]) > 0.0, "{tls}");
}

/// The target's own certificate trusted with --cacert: h2 verifies; a
/// server name the certificate is not for is a `tls` error that says so.
#[test]
fn cacert_and_sni_over_http2() {
    let server = tls_target();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("target.pem");
    std::fs::write(&ca, server.cert_pem().unwrap()).unwrap();
    let ca = ca.to_str().unwrap();
    let target_url = tls_url(&server, "/hi");
    let (out, report) = volley_json(&[
        "run",
        "--http2",
        "--cacert",
        ca,
        "-n",
        "100",
        "-c",
        "2",
        "-q",
        &target_url,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(num(&summary(&report)["ok"]), 100.0);
    let (out, report) = volley_json(&[
        "run",
        "--http2",
        "--cacert",
        ca,
        "--sni",
        "wrong.example",
        "-n",
        "4",
        "-c",
        "1",
        "-q",
        &target_url,
    ]);
    assert_eq!(out.status.code(), Some(1), "no request succeeded");
    let s = summary(&report);
    assert_eq!(s["errors_by_kind"]["tls"], 4, "{s}");
    let example = s["error_examples"]["tls"].as_str().unwrap();
    assert!(example.contains("wrong.example"), "{example}");
}

/// 20 streams on one connection to a 100 ms endpoint for 1 s: about ten
/// waves of 20, where one request at a time would finish about ten.
#[test]
fn streams_of_one_connection_run_concurrently() {
    let _alone = timed();
    for (server, base) in [(target(), "http"), (tls_target(), "https")] {
        let target_url = format!("{base}://{}/sleep/100", server.addr());
        let (out, report) = volley_json(&[
            "run",
            "--http2",
            "--insecure",
            "-c",
            "1",
            "--streams",
            "20",
            "-d",
            "1s",
            "-q",
            &target_url,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_twenty_streams_of_100ms(&report, base);
        assert_eq!(server.stats().h2_connections, 1, "{base}: one connection");
    }
}

/// `--coalesce`: a connection's streams go out in rounds. Every request
/// is still sent and counted (-n exact, also where the last round is not
/// full and a lane stops), the report records the choice, and each
/// response's latency counts from its round's write: against a target that
/// answers after 100 ms, with 20 streams on one connection, the rounds go
/// out back to back and the median is the target's 100 ms.
#[test]
fn coalesced_streams_go_out_in_rounds_and_count_exactly() {
    let _alone = timed();
    let server = target();
    let (out, report) = volley_json(&[
        "run",
        "--http2",
        "-c",
        "3",
        "--streams",
        "4",
        "--coalesce",
        "-n",
        "1001",
        "-q",
        &url(&server, "/hi"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["plan"]["coalesce"], true);
    assert_eq!(num(&summary(&report)["ok"]), 1001.0);
    let stats = wait_for_stats(&server, |s| s.requests_completed >= 1001);
    assert_eq!(stats.requests_completed, 1001);

    let (out, report) = volley_json(&[
        "run",
        "--http2",
        "-c",
        "1",
        "--streams",
        "20",
        "--coalesce",
        "-d",
        "1s",
        "-q",
        &url(&server, "/sleep/100"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_twenty_streams_of_100ms(&report, "coalesced");

    let out = volley(&[
        "run",
        "--http2",
        "-c",
        "1",
        "--streams",
        "2",
        "--coalesce",
        "-n",
        "20",
        &url(&server, "/hi"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("x 2 streams (coalesced)"), "{text}");
    // Without the flag the plan leaves the field out, as before it existed.
    let (_, report) = volley_json(&["run", "--http2", "-n", "10", "-q", &url(&server, "/hi")]);
    assert!(report["plan"].get("coalesce").is_none(), "{}", report["plan"]);
}

/// Large responses fill the read buffer, so the lane that reads them often
/// finishes with more bytes waiting: another lane must take the socket
/// over at once (a lost turn showed as a response held to the timeout).
#[test]
fn large_responses_on_shared_connections_never_wait_for_a_timeout() {
    let _alone = exclusive();
    let server = target();
    let (out, report) = volley_json(&[
        "run",
        "--http2",
        "-n",
        "2000",
        "-c",
        "8",
        "--streams",
        "4",
        "-t",
        "2",
        "--timeout",
        "5s",
        "-q",
        &url(&server, "/bytes/100000"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s = summary(&report);
    assert_eq!(num(&s["ok"]), 2000.0);
    assert!(num(&s["latency_ms"]["max"]) < 2000.0, "{}", s["latency_ms"]);
    assert_eq!(
        num(&s["bytes"]) as u64 / 2000 / 1000,
        100,
        "about 100 kB a response: {}",
        s["bytes"]
    );
}

#[test]
fn open_model_and_stages_run_over_http2() {
    let _alone = timed();
    let server = target();
    let (out, report) = volley_json(&[
        "run",
        "--http2",
        "-R",
        "500",
        "-d",
        "2s",
        "-c",
        "2",
        "--streams",
        "4",
        "-q",
        &url(&server, "/hi"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ok = num(&summary(&report)["ok"]);
    assert!((950.0..=1010.0).contains(&ok), "{ok} requests at 500/s for 2 s");
    let (out, report) = volley_json(&[
        "run",
        "--http2",
        "--stages",
        "1s:4,1s:4",
        "--streams",
        "3",
        "-q",
        &url(&server, "/sleep/5"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(num(&summary(&report)["ok"]) > 100.0);
    assert_eq!(num(&summary(&report)["errors"]), 0.0);
}

/// `volley step` over h2c: each level's connections carry their streams,
/// so two connections of two streams serve about twice what one does.
#[test]
fn step_runs_over_http2() {
    let _alone = timed();
    let server = target();
    let (out, report) = volley_json(&[
        "step",
        "--http2",
        "--streams",
        "2",
        "--levels",
        "1,2",
        "--step-duration",
        "500ms",
        &url(&server, "/sleep/5"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r["protocol"] == "h2c"));
    let (one, two) = (num(&runs[0]["summary"]["ok"]), num(&runs[1]["summary"]["ok"]));
    assert!(
        one > 100.0 && two > 1.6 * one,
        "1 connection: {one}, 2 connections: {two}"
    );
}

#[test]
fn a_plan_runs_over_http2_with_its_cookies_and_asserts() {
    let server = tls_target();
    let (out, report) = volley_json(&[
        "plan",
        "examples/plans/login-and-browse.yml",
        "--base",
        &tls_url(&server, ""),
        "--insecure",
        "--streams",
        "2",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["runs"][0]["protocol"], "h2");
    let s = summary(&report);
    assert_eq!(num(&s["errors"]), 0.0, "{s}");
    assert!(num(&s["ok"]) > 100.0);
}

#[test]
fn http2_failures_keep_their_kinds() {
    let server = target();
    let (_, report) = volley_json(&[
        "run",
        "--http2",
        "-n",
        "50",
        "-c",
        "2",
        "-q",
        &url(&server, "/status/500"),
    ]);
    assert_eq!(summary(&report)["errors_by_kind"]["status"], 50);
    let (_, report) = volley_json(&[
        "run",
        "--http2",
        "-n",
        "20",
        "-c",
        "1",
        "-q",
        &url(&server, "/drop"),
    ]);
    let kinds = summary(&report)["errors_by_kind"].as_object().unwrap().clone();
    assert_eq!(kinds.values().map(num).sum::<f64>(), 20.0, "{kinds:?}");
    assert!(
        kinds.contains_key("reset") || kinds.contains_key("io"),
        "{kinds:?}"
    );
    let (_, report) = volley_json(&[
        "run",
        "--http2",
        "-n",
        "5",
        "-c",
        "1",
        "-q",
        &url(&server, "/garbage"),
    ]);
    assert_eq!(summary(&report)["errors_by_kind"]["protocol"], 5);
    // A stalled stream times out alone; the connection's other streams go on.
    let (_, report) = volley_json(&[
        "run",
        "--http2",
        "--timeout",
        "300ms",
        "-n",
        "4",
        "-c",
        "1",
        "--streams",
        "4",
        "-q",
        &url(&server, "/stall"),
    ]);
    assert_eq!(summary(&report)["errors_by_kind"]["timeout"], 4);
    assert!(
        summary(&report)["error_examples"]["timeout"]
            .as_str()
            .unwrap()
            .contains("300ms")
    );
}

#[test]
fn untrusted_certificate_is_a_tls_error_over_http2() {
    let server = tls_target();
    let (out, report) = volley_json(&[
        "run",
        "--http2",
        "-n",
        "3",
        "-c",
        "1",
        "-q",
        &tls_url(&server, "/hi"),
    ]);
    assert_eq!(out.status.code(), Some(1), "no request succeeded");
    let s = summary(&report);
    assert_eq!(s["errors_by_kind"]["tls"], 3);
    let example = s["error_examples"]["tls"].as_str().unwrap();
    assert!(example.to_lowercase().contains("certificate"), "{example}");
}

#[test]
fn http2_flags_that_do_not_fit_are_usage_errors() {
    let server = target();
    for (args, words) in [
        (vec!["--streams", "4"], "--http2"),
        (vec!["--http2", "--pipeline", "4"], "--streams"),
        (vec!["--http1.1", "--streams", "2"], "--http1.1"),
        (vec!["--http2", "--streams", "0"], "--streams"),
        (vec!["--http2", "--coalesce"], "--streams 2"),
        (vec!["--http1.1", "--coalesce"], "HTTP/2 and HTTP/3"),
        (
            vec!["--http2", "--streams", "4", "--coalesce", "-R", "100"],
            "closed model",
        ),
    ] {
        let mut all = vec!["run"];
        all.extend(args.iter().copied());
        let target_url = url(&server, "/hi");
        all.push(&target_url);
        let out = volley(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(words), "{args:?}: {err}");
    }
}

/// How many streams [`refuse_and_go_away`] answers on each connection.
const ANSWERED_PER_CONNECTION: u32 = 12;

/// An h2c server that refuses some streams, as servers do when they shed
/// load or close a connection: on each connection the third stream is reset
/// with REFUSED_STREAM, and after [`ANSWERED_PER_CONNECTION`] answers a
/// GOAWAY names the last answered stream, so the streams opened after it
/// were never processed either.
fn refuse_and_go_away(mut conn: std::net::TcpStream) {
    use super::hostile::{frame, read_frame, status_block};
    use std::io::{Read, Write};
    const HEADERS: u8 = 0x1;
    const END_STREAM_AND_HEADERS: u8 = 0x5;
    const RST_STREAM: u8 = 0x3;
    const GOAWAY: u8 = 0x7;
    const REFUSED_STREAM: u32 = 0x7;
    let mut preface = [0u8; 24];
    if conn.read_exact(&mut preface).is_err() || conn.write_all(&frame(0x4, 0, 0, &[])).is_err() {
        return;
    }
    // Ends with volley's close, or 5 s of silence after the GOAWAY.
    let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let (mut seen, mut answered) = (0, 0);
    while let Some(incoming) = read_frame(&mut conn) {
        if incoming.kind != HEADERS || answered == ANSWERED_PER_CONNECTION {
            continue;
        }
        let id = incoming.stream;
        seen += 1;
        let reply = if seen == 3 {
            frame(RST_STREAM, 0, id, &REFUSED_STREAM.to_be_bytes())
        } else {
            answered += 1;
            let mut reply = frame(HEADERS, END_STREAM_AND_HEADERS, id, &status_block(b"200"));
            if answered == ANSWERED_PER_CONNECTION {
                let goaway = [id.to_be_bytes(), 0u32.to_be_bytes()].concat();
                reply.extend(frame(GOAWAY, 0, 0, &goaway));
            }
            reply
        };
        if conn.write_all(&reply).is_err() {
            return;
        }
    }
}

/// Streams the server refused (REFUSED_STREAM, or above a GOAWAY's last
/// stream) were never processed: each is sent again, on a new connection
/// where the old one takes no more, and every request of the run succeeds
/// (each connection answers at most twelve, so 300 took 25 at least).
#[test]
fn refused_streams_are_sent_again_and_the_run_moves_to_new_connections() {
    let _alone = timed();
    let addr = super::hostile::serve(refuse_and_go_away);
    for (connections, streams) in [("1", "4"), ("2", "8")] {
        let (out, report) = volley_json(&[
            "run",
            "--http2",
            "-n",
            "300",
            "-c",
            connections,
            "--streams",
            streams,
            "--timeout",
            "2s",
            "-q",
            &format!("http://{addr}/"),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let s = summary(&report);
        assert_eq!(num(&s["ok"]), 300.0, "-c {connections} --streams {streams}: {s}");
        assert_eq!(
            num(&s["errors"]),
            0.0,
            "-c {connections} --streams {streams}: {s}"
        );
    }
}
