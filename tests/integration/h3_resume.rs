//! HTTP/3 session resumption and 0-RTT against the embedded target
//! (quinn, rustls' server): with one connection at a time, every QUIC
//! handshake after the first resumes, and the summary counts exactly
//! those; `--no-tls-resume` makes every one full; `--0rtt` sends each
//! resumed connection's request as early data, which the server accepts,
//! with every request sent and counted once; a server that restarted (its
//! sessions lost) refuses the early data, and the refused requests go
//! again after the handshake. `--cacert` and `--insecure` are both used:
//! each wraps its own certificate verifier, and each must be counted.
//! (`--0rtt` without `--http3` is refused in http3.rs, with the other
//! flags HTTP/3 cannot take.)

use super::http3::{h3_run, h3_target, h3_url, run_across_a_restart};
use super::support::{num, stderr, stdout, summary, volley, wait_for_stats};
use serde_json::Value;

/// `volley run --http3 -c 1 --no-keepalive -n N` with `extra` flags: one
/// connection at a time, a new one per request. Its summary.
fn churn(server: &volley::server::ServerHandle, n: usize, extra: &[&str]) -> Value {
    let n = n.to_string();
    let mut args = vec!["-n", &n, "-c", "1", "--no-keepalive"];
    args.extend_from_slice(extra);
    let url = h3_url(server, "/hi");
    args.push(&url);
    summary(&h3_run(&args)).clone()
}

#[test]
fn every_quic_handshake_after_the_first_resumes_and_is_counted() {
    let server = h3_target();
    let s = churn(&server, 20, &[]);
    assert_eq!(num(&s["ok"]), 20.0, "{s}");
    let tls = &s["tls"];
    assert_eq!(
        (num(&tls["handshakes"]), num(&tls["resumed"])),
        (20.0, 19.0),
        "the first handshake is full, the rest resume: {tls}"
    );
    assert_eq!(num(&tls["zero_rtt_tried"]), 0.0, "no 0-RTT unless asked: {tls}");
    assert_eq!(
        wait_for_stats(&server, |s| s.requests_completed >= 20).h3_connections,
        20
    );

    // The pinned --cacert verifier, not --insecure's: counted the same.
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, server.cert_pem().expect("a TLS target has a certificate")).unwrap();
    let url = format!("https://localhost:{}/hi", server.addr().port());
    let out = volley(&[
        "run",
        "--http3",
        "-q",
        "-n",
        "10",
        "-c",
        "1",
        "--no-keepalive",
        "--cacert",
        ca.to_str().unwrap(),
        &url,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("TLS handshakes 10 (9 resumed)  mean ")),
        "{text}"
    );
}

#[test]
fn no_tls_resume_makes_every_quic_handshake_full() {
    let server = h3_target();
    let report = h3_run(&[
        "-n",
        "12",
        "-c",
        "2",
        "--no-keepalive",
        "--no-tls-resume",
        &h3_url(&server, "/hi"),
    ]);
    let tls = &summary(&report)["tls"];
    assert_eq!(
        (num(&tls["handshakes"]), num(&tls["resumed"])),
        (12.0, 0.0),
        "{tls}"
    );
    assert_eq!(report["plan"]["tls_resume"], false);
    assert_eq!(report["plan"]["tls_0rtt"], false);
}

#[test]
fn zero_rtt_sends_resumed_connections_requests_early_and_counts_stay_exact() {
    let server = h3_target();
    let s = churn(&server, 20, &["--0rtt"]);
    assert_eq!(num(&s["ok"]), 20.0, "{s}");
    assert_eq!(num(&s["errors"]), 0.0, "{s}");
    let tls = &s["tls"];
    assert_eq!(
        (
            num(&tls["handshakes"]),
            num(&tls["resumed"]),
            num(&tls["zero_rtt_tried"]),
            num(&tls["zero_rtt_accepted"])
        ),
        (20.0, 19.0, 19.0, 19.0),
        "every resumed connection sent its request early, and the server took it: {tls}"
    );
    // Each request reached the server once: none was sent twice.
    let stats = wait_for_stats(&server, |s| s.requests_completed >= 20);
    assert_eq!((stats.requests_completed, stats.h3_connections), (20, 20));
    let url = h3_url(&server, "/hi");
    let out = volley(&[
        "run",
        "--http3",
        "--insecure",
        "--0rtt",
        "-q",
        "-n",
        "5",
        "-c",
        "1",
        "--no-keepalive",
        &url,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("TLS handshakes 5 (4 resumed; 0-RTT 4 tried, 4 accepted)  mean ")),
        "{text}"
    );

    // Several connections at once, several streams each, a body: still
    // exact.
    let server = h3_target();
    let report = h3_run(&[
        "-n",
        "300",
        "-c",
        "4",
        "--streams",
        "2",
        "--no-keepalive",
        "--0rtt",
        "-m",
        "POST",
        "-b",
        "early",
        &h3_url(&server, "/echo"),
    ]);
    let s = summary(&report);
    assert_eq!((num(&s["ok"]), num(&s["errors"])), (300.0, 0.0), "{s}");
    let tls = &s["tls"];
    let (tried, accepted) = (num(&tls["zero_rtt_tried"]), num(&tls["zero_rtt_accepted"]));
    assert!(tried > 0.0 && accepted == tried, "{tls}");
    assert!(
        tried <= num(&tls["resumed"]),
        "0-RTT only on resumed connections: {tls}"
    );
    assert_eq!(report["plan"]["tls_0rtt"], true);
    let stats = wait_for_stats(&server, |s| s.requests_completed >= 300);
    assert_eq!(stats.requests_completed, 300);
}

/// A server that restarted has lost the sessions volley resumes: it does
/// a full handshake and refuses the early data, whose requests volley
/// sends again once the handshake is done.
#[test]
fn early_data_a_restarted_server_refuses_is_sent_again() {
    // A request every 100 ms: the server is seldom caught mid-request.
    let args = [
        "--0rtt",
        "--no-keepalive",
        "-c",
        "1",
        "--rate",
        "10",
        "-d",
        "3s",
        "--timeout",
        "2s",
    ];
    let report = run_across_a_restart(&args, "/hi", 1200);
    let s = summary(&report);
    let tls = &s["tls"];
    let (tried, accepted) = (num(&tls["zero_rtt_tried"]), num(&tls["zero_rtt_accepted"]));
    assert!(accepted > 0.0, "before and after the restart: {tls}");
    assert!(tried > accepted, "the new server refused early data: {tls}");
    assert!(
        num(&tls["handshakes"]) - num(&tls["resumed"]) >= 2.0,
        "a full handshake with each server: {tls}"
    );
    // The refused requests were answered: only a request sent while no
    // server was up (refused) may have failed.
    assert!(num(&s["errors"]) <= 2.0, "{s}");
    assert!(num(&s["ok"]) >= 25.0, "{s}");
}
