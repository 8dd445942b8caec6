//! Hostile HTTP/3 servers: aioquic in tests/h3/hostile_server.py, one
//! misbehaviour a run (`--mode`), started on a free 127.0.0.1 port as the
//! interop tests start theirs. Each volley run must end within its bounds of
//! time and memory and count its requests exactly, or fail them with a kind
//! and an example that say why: a handshake that never finishes, floods of
//! PING and of NEW_CONNECTION_ID frames, field sections past the limit
//! volley advertises, and a server that gives no flow-control credit.
//!
//! A server dropping every packet and one answering with stateless resets
//! are tested in `http3`. Without aioquic these tests are skipped off CI, as
//! the interop tests are, and fail on it.

use super::h3_interop::{Aioquic, aioquic_python};
use super::hostile::{count, run_assigning_plan_at};
use super::support::{exclusive, num, schema_violations, stderr, summary, timed, volley_json};
use serde_json::Value;
use std::time::{Duration, Instant};

/// What a run may take beyond what its flags allow (start-up, the report,
/// a loaded CI machine).
const GRACE: Duration = Duration::from_secs(4);
/// Peak resident memory a run may reach: an HTTP/3 run against these
/// servers stays near 14 MiB.
const MAX_RSS: f64 = 64.0 * 1024.0 * 1024.0;

/// A run against the hostile server's `mode` with `flags` (one connection,
/// `--insecure`, the server's `/hi`), which must end within `bound` plus
/// [`GRACE`] and [`MAX_RSS`]; its summary, and the server's counts.
fn run_against(mode: &str, flags: &[&str], bound: Duration) -> Option<(Value, Value)> {
    let (server, _dir) = hostile_server(mode)?;
    let url = server.url("/hi");
    let mut args = vec!["run", "--http3", "--insecure", "-c", "1", "-q"];
    args.extend_from_slice(flags);
    args.push(&url);
    let began = Instant::now();
    let (out, report) = volley_json(&args);
    let took = began.elapsed();
    assert!(
        took < bound + GRACE,
        "{mode}: {args:?} took {took:?}: {}",
        stderr(&out)
    );
    let violations = schema_violations(&report);
    assert!(violations.is_empty(), "{violations:?}");
    let s = summary(&report).clone();
    let rss = num(&s["tool_cpu"]["peak_rss_bytes"]);
    eprintln!("{mode}: {took:?}, peak RSS {rss} bytes");
    assert!(rss > 0.0 && rss < MAX_RSS, "{mode}: peak RSS {rss} bytes");
    Some((s, server.counts()))
}

/// The hostile server in `mode`, ready, and the directory of its
/// certificate; `None` without aioquic (off CI).
fn hostile_server(mode: &str) -> Option<(Aioquic, tempfile::TempDir)> {
    let python = aioquic_python()?;
    let dir = tempfile::tempdir().unwrap();
    let (server, _cert) = Aioquic::script(&python, dir.path(), "hostile_server.py", &["--mode", mode]);
    Some((server, dir))
}

/// Every request failed as `kind`, with an example that says `why`.
fn assert_all_failed(s: &Value, requests: f64, kind: &str, why: &str) {
    assert_eq!(num(&s["requests"]), requests, "{s}");
    assert_eq!(count(s, kind), requests, "{s}");
    assert_example(s, kind, why);
}

fn assert_example(s: &Value, kind: &str, why: &str) {
    let example = s["error_examples"][kind].as_str().unwrap_or_default();
    assert!(example.contains(why), "expected {why:?}: {s}");
}

/// The server answers the client's Initial (its ServerHello arrives) but
/// never sends its Handshake packets: each connection fails at the connect
/// timeout as a TLS handshake that stalled, not as a silent port.
#[test]
fn a_handshake_that_never_finishes_fails_as_tls_by_the_connect_timeout() {
    let _serial = timed();
    let flags = ["-n", "2", "--connect-timeout", "1s"];
    let Some((s, counts)) = run_against("handshake", &flags, Duration::from_secs(2)) else {
        return;
    };
    assert_all_failed(&s, 2.0, "tls", "TLS handshake not finished within 1s");
    // It did answer, once for each connection, and completed none.
    assert!(num(&counts["initials"]) >= 2.0, "{counts}");
    assert_eq!(counts["connections"], 0, "{counts}");
}

/// Packets of 600 PING frames each, sent as fast as aioquic can, all
/// through the run (some 300,000 frames): each packet must be acknowledged,
/// and the requests still go through, every one counted.
#[test]
fn a_ping_flood_leaves_every_request_answered() {
    let _serial = exclusive();
    let flags = ["-n", "300", "--streams", "2", "--timeout", "2s"];
    let Some((s, counts)) = run_against("ping-flood", &flags, Duration::from_secs(10)) else {
        return;
    };
    assert_eq!(num(&s["ok"]), 300.0, "{s}");
    assert_eq!(num(&s["errors"]), 0.0, "{s}");
    assert_eq!(counts["requests"], 300, "{counts}");
    assert_eq!(counts["connections"], 1, "{counts}");
    assert!(num(&counts["pings"]) >= 10_000.0, "{counts}");
}

/// Thousands of NEW_CONNECTION_ID frames a connection, sent as soon as
/// the handshake is done: retiring none, past the client's
/// active_connection_id_limit at the first few, which closes the
/// connection as a protocol error naming the limit (the next request gets
/// a new connection); or each retiring all before it, legal but each a
/// RETIRE_CONNECTION_ID for the client to send, which quinn queues only so
/// far. Both in bounded time and memory.
#[test]
fn new_connection_id_floods_close_the_connection_as_protocol_errors() {
    let _serial = exclusive();
    let flags = ["-n", "6", "--timeout", "2s"];
    let Some((s, counts)) = run_against("cid-overflow", &flags, Duration::from_secs(3)) else {
        return;
    };
    // The flood comes before any response.
    assert_all_failed(&s, 6.0, "protocol", "active_connection_id_limit");
    assert_eq!(num(&s["tls"]["handshakes"]), 6.0, "{s}");
    // Each connection took some 200 before its close reached the server.
    assert!(num(&counts["cids"]) >= 600.0, "{counts}");

    let Some((s, counts)) = run_against("cid-churn", &flags, Duration::from_secs(3)) else {
        return;
    };
    // Whether the client's queue of retirements overflows depends on how
    // fast its RETIRE_CONNECTION_IDs go out: each request is answered, or
    // fails with the connection, named.
    let failed = count(&s, "protocol");
    assert_eq!(failed + num(&s["ok"]), 6.0, "{s}");
    if failed > 0.0 {
        assert_example(&s, "protocol", "active_connection_id_limit");
    }
    assert!(num(&counts["requests"]) >= num(&s["ok"]), "{counts} {s}");
    assert!(num(&counts["cids"]) >= 1000.0, "{counts}");
}

/// A response whose HEADERS frame is 1 MiB, four times the field section
/// volley advertises: refused from the frame's length, nothing buffered.
#[test]
fn a_headers_frame_past_the_limit_is_a_protocol_error() {
    let _serial = exclusive();
    let flags = ["-n", "10", "--timeout", "2s"];
    let Some((s, counts)) = run_against("big-headers", &flags, Duration::from_secs(2)) else {
        return;
    };
    assert_all_failed(&s, 10.0, "protocol", "larger than the 256 KiB volley allows");
    assert_eq!(counts["requests"], 10, "{counts}");
}

/// A 200 kB HEADERS frame of one-byte static table references, some 14 MB
/// once decoded. A run decodes only `:status` and counts the responses; a
/// plan that assigns the response keeps its fields, and there the section
/// is refused past the 256 KiB volley advertised, where it used to be kept
/// whole (some 48 MB of memory a response).
#[test]
fn a_qpack_bomb_is_refused_where_fields_are_kept() {
    let _serial = exclusive();
    let flags = ["-n", "10", "--timeout", "2s"];
    let Some((s, _)) = run_against("qpack-bomb", &flags, Duration::from_secs(2)) else {
        return;
    };
    assert_eq!(num(&s["status"]["200"]), 10.0, "{s}");
    let (server, _dir) = hostile_server("qpack-bomb").unwrap();
    let flags = ["--http3", "--insecure", "-c", "4"];
    let step = run_assigning_plan_at(&server.url(""), 4, &flags);
    assert_all_failed(&step, 4.0, "protocol", "larger than the 256 KiB volley allows");
}

/// A server that gives no flow-control credit (max_data and
/// max_stream_data of 0): no request can be sent, and each ends at its
/// timeout as a timeout.
#[test]
fn a_zero_flow_control_window_ends_each_request_at_its_timeout() {
    let _serial = timed();
    let flags = ["-n", "4", "--timeout", "500ms"];
    let Some((s, counts)) = run_against("zero-window", &flags, Duration::from_secs(2)) else {
        return;
    };
    assert_all_failed(&s, 4.0, "timeout", "no complete response within 500ms");
    assert_eq!(counts["requests"], 0, "{counts}");
    assert_eq!(counts["body_bytes"], 0, "{counts}");
}
