//! HTTP/2 servers breaking the rules RFC 9113 sets for them: each sends one
//! offending frame after volley's first request, and each must end as a
//! `protocol` error naming the rule, within the run's bounds of time and
//! memory ([`run_hostile`]), the connection (or stream) given up.

use super::hostile::{count, frame, h2_accept, run_assigning_plan, run_hostile, serve, status_block};
use super::support::timed;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// After volley's first HEADERS (stream `id`), writes `offence(id)` and
/// then stays silent until volley goes away (at most 5 s). It waits by
/// reading, not sleeping, so its thread ends when volley closes: volley
/// reconnects at once after each refusal, and a thread kept per closed
/// connection would pile up by the thousand.
fn offend(mut conn: TcpStream, offence: fn(u32) -> Vec<u8>) {
    if let Some(id) = h2_accept(&mut conn) {
        let _ = conn.write_all(&offence(id));
        let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
        let mut sink = [0u8; 4096];
        while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
    }
}

/// A hostile run over HTTP/2 against a server of `offend`, ended after a few
/// requests: the offence comes with the first response on each connection,
/// so the run need not go on for its whole duration to show the refusal.
fn run_refused(addr: std::net::SocketAddr) -> Value {
    run_hostile(addr, &["--http2", "-n", "3"])
}

/// A run against a server of `offend`, which must count `protocol` errors
/// whose example says `why`.
fn assert_refused(s: &Value, why: &str) {
    assert!(count(s, "protocol") >= 1.0, "{s}");
    let example = s["error_examples"]["protocol"].as_str().unwrap_or_default();
    assert!(example.contains(why), "expected '{why}': {example}");
}

fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    frame(0x8, 0, stream, &increment.to_be_bytes())
}

#[test]
fn a_connection_window_update_that_overflows_is_refused() {
    let _serial = timed();
    let addr = serve(|conn| offend(conn, |_| window_update(0, 0x7fff_ffff)));
    assert_refused(&run_refused(addr), "WINDOW_UPDATE overflowed the window");
}

#[test]
fn a_zero_connection_window_update_is_refused() {
    let _serial = timed();
    let addr = serve(|conn| offend(conn, |_| window_update(0, 0)));
    assert_refused(&run_refused(addr), "WINDOW_UPDATE of zero");
}

#[test]
fn a_stream_window_update_that_overflows_is_refused() {
    let _serial = timed();
    let addr = serve(|conn| offend(conn, |id| window_update(id, 0x7fff_ffff)));
    assert_refused(&run_refused(addr), "WINDOW_UPDATE overflowed the stream's window");
}

#[test]
fn a_zero_stream_window_update_is_refused() {
    let _serial = timed();
    let addr = serve(|conn| offend(conn, |id| window_update(id, 0)));
    assert_refused(&run_refused(addr), "WINDOW_UPDATE of zero on the stream");
}

#[test]
fn frames_on_idle_streams_are_refused() {
    let _serial = timed();
    // HEADERS on a stream volley has not opened yet.
    let addr = serve(|conn| offend(conn, |id| frame(0x1, 0x5, id + 2, &[0x88])));
    assert_refused(&run_refused(addr), "stream volley never opened");
    // DATA likewise.
    let addr = serve(|conn| offend(conn, |id| frame(0x0, 0x1, id + 10, b"x")));
    assert_refused(&run_refused(addr), "stream volley never opened");
}

#[test]
fn a_second_final_headers_block_is_refused() {
    let _serial = timed();
    let addr = serve(|conn| {
        offend(conn, |id| {
            // :status 200 (static index 8), twice, neither ending the stream.
            let mut out = frame(0x1, 0x4, id, &[0x88]);
            out.extend(frame(0x1, 0x4, id, &status_block(b"204")));
            out
        })
    });
    assert_refused(&run_refused(addr), "second final response HEADERS");
}

#[test]
fn a_push_promise_is_refused() {
    let _serial = timed();
    let addr = serve(|conn| {
        offend(conn, |id| {
            let mut payload = 2u32.to_be_bytes().to_vec();
            payload.extend([0x82, 0x84]);
            frame(0x5, 0x4, id, &payload)
        })
    });
    assert_refused(&run_refused(addr), "server push");
}

/// One 4 KB header put in the HPACK dynamic table, then named 12,000
/// times by its one-byte index: a 16 KB frame that decodes to ~48 MB.
fn hpack_bomb(id: u32) -> Vec<u8> {
    let mut block = vec![0x88, 0x40, 0x01, b'x', 0x7f];
    // The value's length, 4,000, as an HPACK integer after the 7-bit
    // prefix (127): 3,873 = 0x21 + 0x1e * 128.
    block.extend([0xa1, 0x1e]);
    block.extend([b'a'; 4000]);
    block.extend([0xbe; 12_000]);
    frame(0x1, 0x5, id, &block)
}

#[test]
fn a_header_list_past_the_advertised_limit_is_refused_where_headers_are_kept() {
    let _serial = timed();
    // Where nobody keeps the headers (volley run), only :status is decoded
    // into memory: the bomb costs nothing and the response counts.
    let addr = serve(|conn| offend(conn, hpack_bomb));
    let s = run_hostile(addr, &["--http2"]);
    assert!(s["status"]["200"].as_u64().is_some_and(|n| n >= 1), "{s}");
    // A plan that assigns the response keeps its headers: past the 256 KiB
    // volley advertised it is refused, in bounded memory.
    let addr = serve(|conn| offend(conn, hpack_bomb));
    let step = run_assigning_plan(addr, 1, &["--http2"]);
    assert_eq!(step["errors_by_kind"]["protocol"], 1, "{step}");
    let example = step["error_examples"]["protocol"].as_str().unwrap_or_default();
    assert!(
        example.contains("header list larger than the 256 KiB"),
        "{example}"
    );
}
