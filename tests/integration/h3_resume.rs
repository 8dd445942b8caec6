//! HTTP/3 session resumption against the embedded target (quinn, rustls'
//! server): with one connection at a time, every QUIC handshake after the
//! first resumes, and the summary counts exactly those; `--no-tls-resume`
//! makes every one full. `--cacert` and `--insecure` are both used: each
//! wraps its own certificate verifier, and each must be counted.

use super::http3::{h3_run, h3_target, h3_url};
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
}
