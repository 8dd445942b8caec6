//! The embedded target server, spoken to with raw bytes over
//! `std::net::TcpStream`, so what is checked is the bytes on the wire rather
//! than what some HTTP client makes of them. Every read has a timeout and
//! every server listens on 127.0.0.1 port 0.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use volley::server::{ServerHandle, ServerOptions, StatsSnapshot, spawn};

use super::support::wait_for_stats;

/// Upper bound for any single read in these tests.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

fn start() -> ServerHandle {
    start_with(None)
}

fn start_with(max_inflight: Option<usize>) -> ServerHandle {
    spawn(ServerOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        max_inflight,
        ..Default::default()
    })
    .expect("server starts on 127.0.0.1:0")
}

fn connect(server: &ServerHandle) -> Client {
    let stream = TcpStream::connect(server.addr()).expect("connect to the server");
    stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
    Client {
        stream,
        buf: Vec::new(),
    }
}

#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A connection plus the bytes read past the last response, so pipelined
/// responses that arrive in one read are not lost.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write request");
    }

    fn get(&mut self, path: &str) -> Response {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
        self.response()
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).expect("read from the server");
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    fn read_exact_buffered(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            assert!(self.fill() > 0, "EOF before {n} bytes");
        }
        self.buf.drain(..n).collect()
    }

    /// Reads one response; `head_only` for answers to `HEAD`.
    fn response_to(&mut self, head_only: bool) -> Response {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut parsed = httparse::Response::new(&mut headers);
            match parsed.parse(&self.buf).expect("a valid HTTP response") {
                httparse::Status::Complete(head_len) => {
                    let status = parsed.code.unwrap();
                    let headers: Vec<(String, String)> = parsed
                        .headers
                        .iter()
                        .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()))
                        .collect();
                    self.buf.drain(..head_len);
                    let mut response = Response {
                        status,
                        headers,
                        body: Vec::new(),
                    };
                    if !head_only {
                        let len = response
                            .header("content-length")
                            .map_or(0, |v| v.parse::<usize>().unwrap());
                        response.body = self.read_exact_buffered(len);
                    }
                    return response;
                }
                httparse::Status::Partial => {
                    assert!(self.fill() > 0, "EOF in a response head");
                }
            }
        }
    }

    fn response(&mut self) -> Response {
        self.response_to(false)
    }

    /// Reads until EOF; fails on a timeout.
    fn rest(&mut self) -> Vec<u8> {
        let mut rest = std::mem::take(&mut self.buf);
        self.stream
            .read_to_end(&mut rest)
            .expect("the server closes the connection");
        rest
    }
}

#[test]
fn hi_says_world() {
    let server = start();
    let r = connect(&server).get("/hi");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"world");
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.header("server"), Some("volley"));
}

#[test]
fn query_string_is_ignored_for_routing() {
    let server = start();
    let r = connect(&server).get("/hi?x=1&y=2");
    assert_eq!(r.body, b"world");
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let server = start();
    let mut client = connect(&server);
    assert_eq!(client.get("/hi").body, b"world");
    assert_eq!(client.get("/status/201").status, 201);
    assert_eq!(client.get("/hi").body, b"world");
    assert_eq!(server.stats().connections_accepted, 1);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = start();
    let mut client = connect(&server);
    client.send(
        b"GET /sleep/30 HTTP/1.1\r\n\r\n\
          GET /hi HTTP/1.1\r\n\r\n\
          POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc\
          GET /status/202 HTTP/1.1\r\n\r\n",
    );
    let first = client.response();
    assert_eq!(first.status, 200);
    assert!(first.body.starts_with(b"slept"));
    assert_eq!(client.response().body, b"world");
    assert_eq!(client.response().body, b"abc");
    assert_eq!(client.response().status, 202);
}

#[test]
fn many_pipelined_requests_in_one_write() {
    let server = start();
    let mut client = connect(&server);
    let batch = b"GET /hi HTTP/1.1\r\n\r\n".repeat(500);
    client.send(&batch);
    for _ in 0..500 {
        assert_eq!(client.response().body, b"world");
    }
}

#[test]
fn status_endpoint() {
    let server = start();
    let mut client = connect(&server);
    let r = client.get("/status/503");
    assert_eq!(r.status, 503);
    assert!(!r.body.is_empty());
    let r = client.get("/status/204");
    assert_eq!(r.status, 204);
    assert_eq!(r.header("content-length"), None);
    assert_eq!(client.get("/hi").body, b"world", "no stray body after 204");
    assert_eq!(client.get("/status/100").status, 400);
    assert_eq!(client.get("/status/600").status, 400);
}

#[test]
fn bytes_endpoint_sends_exactly_n_bytes() {
    let server = start();
    let mut client = connect(&server);
    let r = client.get("/bytes/100000");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 100_000);
    assert_eq!(client.get("/bytes/0").body.len(), 0);
    assert_eq!(client.get("/bytes/268435457").status, 400);
}

#[test]
fn head_gets_the_length_but_no_body() {
    let server = start();
    let mut client = connect(&server);
    client.send(b"HEAD /bytes/1234 HTTP/1.1\r\n\r\n");
    let r = client.response_to(true);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("1234"));
    client.send(b"HEAD /hi HTTP/1.1\r\n\r\n");
    assert_eq!(client.response_to(true).header("content-length"), Some("5"));
    // A body would show up here, ahead of the next response.
    assert_eq!(client.get("/hi").body, b"world");
}

#[test]
fn echo_returns_a_content_length_body() {
    let server = start();
    let mut client = connect(&server);
    client.send(
        b"POST /echo HTTP/1.1\r\nContent-Type: application/x-test\r\nContent-Length: 11\r\n\r\nhello world",
    );
    let r = client.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello world");
    assert_eq!(r.header("content-type"), Some("application/x-test"));
}

#[test]
fn echo_returns_a_chunked_body() {
    let server = start();
    let mut client = connect(&server);
    client.send(b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
    std::thread::sleep(Duration::from_millis(20));
    client.send(b"6\r\n world\r\n0\r\n\r\n");
    let r = client.response();
    assert_eq!(r.body, b"hello world");
    assert_eq!(r.header("content-type"), None);
}

#[test]
fn echo_of_a_large_body() {
    let server = start();
    let mut client = connect(&server);
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    client.send(format!("PUT /echo HTTP/1.1\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes());
    client.send(&body);
    assert_eq!(client.response().body, body);
}

#[test]
fn expect_continue_gets_a_100_before_the_body() {
    let server = start();
    let mut client = connect(&server);
    client.send(b"POST /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
    assert_eq!(client.response_to(true).status, 100);
    client.send(b"ok");
    assert_eq!(client.response().body, b"ok");
}

#[test]
fn sleep_waits() {
    let server = start();
    let mut client = connect(&server);
    let start = Instant::now();
    let r = client.get("/sleep/50");
    assert_eq!(r.status, 200);
    assert!(start.elapsed() >= Duration::from_millis(50));
}

#[test]
fn cpu_and_alloc_answer() {
    let server = start();
    let mut client = connect(&server);
    let start = Instant::now();
    assert_eq!(client.get("/cpu/30").status, 200);
    assert!(start.elapsed() >= Duration::from_millis(30));
    let r = client.get("/alloc/2048");
    assert_eq!(r.status, 200);
    assert!(String::from_utf8_lossy(&r.body).contains("2048"));
    assert_eq!(client.get("/alloc/1048577").status, 400);
}

#[test]
fn drop_closes_without_a_byte() {
    let server = start();
    let mut client = connect(&server);
    client.send(b"GET /drop HTTP/1.1\r\n\r\n");
    assert_eq!(client.rest(), b"");
}

#[test]
fn stall_never_answers() {
    let server = start();
    let mut client = connect(&server);
    client.send(b"GET /stall HTTP/1.1\r\n\r\n");
    client
        .stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut byte = [0u8; 1];
    let err = client.stream.read(&mut byte).expect_err("no bytes from /stall");
    assert!(
        matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{err}"
    );
}

#[test]
fn garbage_is_not_http() {
    let server = start();
    let mut client = connect(&server);
    client.send(b"GET /garbage HTTP/1.1\r\n\r\n");
    let bytes = client.rest();
    assert!(!bytes.is_empty());
    let looks_like_http = bytes.len() >= 12
        && bytes.starts_with(b"HTTP/1.")
        && bytes[8] == b' '
        && bytes[9..12].iter().all(u8::is_ascii_digit);
    assert!(!looks_like_http, "{:?}", String::from_utf8_lossy(&bytes));
}

#[test]
fn slow_drips_its_body() {
    let server = start();
    let mut client = connect(&server);
    client.send(b"GET /slow/200 HTTP/1.1\r\n\r\n");
    let start = Instant::now();
    let r = client.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 10);
    assert!(
        start.elapsed() >= Duration::from_millis(180),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn stats_count_connections_and_requests() {
    let server = start();
    const CONNECTIONS: u64 = 3;
    const PER_CONNECTION: u64 = 4;
    for _ in 0..CONNECTIONS {
        let mut client = connect(&server);
        for _ in 0..PER_CONNECTION {
            assert_eq!(client.get("/hi").status, 200);
        }
    }
    let requests = CONNECTIONS * PER_CONNECTION;
    let expected = StatsSnapshot {
        connections_accepted: CONNECTIONS,
        connections_closed: CONNECTIONS,
        http1_connections: CONNECTIONS,
        h2_connections: 0,
        h3_connections: 0,
        requests_received: requests,
        requests_completed: requests,
    };
    assert_eq!(wait_for_stats(&server, |s| *s == expected), expected);

    // `/stats` reports the same numbers, its own request counted as received
    // but not yet completed.
    let r = connect(&server).get("/stats");
    assert_eq!(r.header("content-type"), Some("application/json"));
    let json: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "connections_accepted": CONNECTIONS + 1,
            "connections_closed": CONNECTIONS,
            "http1_connections": CONNECTIONS + 1,
            "h2_connections": 0,
            "h3_connections": 0,
            "requests_received": requests + 1,
            "requests_completed": requests,
        })
    );
}

#[test]
fn connection_close_is_honoured() {
    let server = start();
    let mut client = connect(&server);
    client.send(b"GET /hi HTTP/1.1\r\nConnection: close\r\n\r\n");
    let r = client.response();
    assert_eq!(r.body, b"world");
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(client.rest(), b"");
}

#[test]
fn http10_closes_unless_asked_to_keep_alive() {
    let server = start();
    let mut client = connect(&server);
    client.send(b"GET /hi HTTP/1.0\r\n\r\n");
    assert_eq!(client.response().body, b"world");
    assert_eq!(client.rest(), b"");

    let mut client = connect(&server);
    client.send(b"GET /hi HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(client.response().header("connection"), Some("keep-alive"));
    client.send(b"GET /hi HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(client.response().body, b"world");
}

#[test]
fn malformed_request_gets_400_and_a_close() {
    let server = start();
    let mut client = connect(&server);
    client.send(b"THIS IS NOT HTTP\r\n\r\n");
    let r = client.response();
    assert_eq!(r.status, 400);
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(client.rest(), b"");
}

#[test]
fn bad_paths_get_404_and_400() {
    let server = start();
    let mut client = connect(&server);
    assert_eq!(client.get("/no/such/thing").status, 404);
    assert_eq!(client.get("/sleep/abc").status, 400);
    assert_eq!(client.get("/bytes/-1").status, 400);
    assert_eq!(client.get("/hi").body, b"world", "still keep-alive");
}

#[test]
fn oversized_body_gets_413() {
    let server = start();
    let mut client = connect(&server);
    client.send(b"POST /echo HTTP/1.1\r\nContent-Length: 1000000000\r\n\r\n");
    assert_eq!(client.response().status, 413);
}

#[test]
fn clients_that_vanish_do_not_hurt_the_server() {
    let server = start();
    for partial in [
        &b"GET /hi HT"[..],
        b"POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        b"GET /bytes/10000000 HTTP/1.1\r\n\r\n",
    ] {
        let mut client = connect(&server);
        client.send(partial);
    }
    let stats = wait_for_stats(&server, |s| s.connections_closed == 4);
    assert_eq!(stats.connections_closed, 4);
    assert_eq!(connect(&server).get("/hi").body, b"world");
}

#[test]
fn stop_is_quick_even_with_a_stalled_connection() {
    let server = start();
    let mut stalled = connect(&server);
    stalled.send(b"GET /stall HTTP/1.1\r\n\r\n");
    let mut sleeping = connect(&server);
    sleeping.send(b"GET /sleep/60000 HTTP/1.1\r\n\r\n");
    let mut burning = connect(&server);
    burning.send(b"GET /cpu/60000 HTTP/1.1\r\n\r\n");
    wait_for_stats(&server, |s| s.requests_received == 3);

    let start = Instant::now();
    server.stop();
    assert!(start.elapsed() < Duration::from_secs(1), "{:?}", start.elapsed());
    // The stalled client sees its connection end (EOF or reset), not a
    // timeout.
    let mut byte = [0u8; 1];
    match stalled.stream.read(&mut byte) {
        Ok(n) => assert_eq!(n, 0),
        Err(e) => assert!(
            !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "{e}"
        ),
    }
}

#[test]
fn binding_a_used_address_fails_naming_it() {
    let server = start();
    let err = spawn(ServerOptions {
        addr: server.addr(),
        ..Default::default()
    })
    .expect_err("the address is taken");
    assert_eq!(err.kind(), ErrorKind::AddrInUse);
    assert!(err.to_string().contains(&server.addr().to_string()), "{err}");
}

#[test]
fn spawn_and_stop_work_from_inside_an_async_context() {
    let taken = start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // A failed bind must not drop a runtime here (tokio panics on that).
        assert!(
            spawn(ServerOptions {
                addr: taken.addr(),
                ..Default::default()
            })
            .is_err()
        );
        let server = start();
        assert_eq!(connect(&server).get("/hi").body, b"world");
        server.stop();
    });
}

#[test]
fn run_serves_until_its_shutdown_future_resolves() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = runtime.spawn(volley::server::run(listener, async {
        let _ = stopped.await;
    }));

    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut client = Client {
        stream,
        buf: Vec::new(),
    };
    assert_eq!(client.get("/hi").body, b"world");

    stop.send(()).unwrap();
    let result = runtime.block_on(async { tokio::time::timeout(Duration::from_secs(2), server).await });
    assert!(matches!(result, Ok(Ok(Ok(())))), "{result:?}");
    assert_eq!(client.rest(), b"", "the connection is closed at shutdown");
}

const MS: Duration = Duration::from_millis(1);

/// Times measured from the client's side start a little before the server's,
/// so a response held until a server-side instant arrives no earlier than
/// that instant measured here; the slack only covers clock granularity.
const SLACK: Duration = Duration::from_millis(10);

#[test]
fn pause_holds_every_response_until_it_ends() {
    let server = start();
    let mut pauser = connect(&server);
    let mut other = connect(&server);
    // Connected and served once, so nothing below waits on an accept.
    assert_eq!(other.get("/hi").body, b"world");

    let start = Instant::now();
    pauser.send(b"GET /pause/300 HTTP/1.1\r\n\r\n");
    std::thread::sleep(50 * MS);
    let r = other.get("/hi");
    let hi_at = start.elapsed();
    assert_eq!(r.body, b"world");
    assert!(hi_at + SLACK >= 300 * MS, "answered during the pause: {hi_at:?}");
    assert!(hi_at < 600 * MS, "{hi_at:?}");

    let r = pauser.response();
    let pause_at = start.elapsed();
    assert_eq!(r.status, 200);
    assert!(
        r.body.starts_with(b"paused"),
        "{:?}",
        String::from_utf8_lossy(&r.body)
    );
    assert!(pause_at + SLACK >= 300 * MS, "{pause_at:?}");
    assert!(pause_at < 600 * MS, "{pause_at:?}");

    let after = Instant::now();
    assert_eq!(other.get("/hi").body, b"world");
    assert!(
        after.elapsed() < 100 * MS,
        "still held after the pause: {:?}",
        after.elapsed()
    );
    // The held request was received during the pause and completed after it.
    let stats = wait_for_stats(&server, |s| s.requests_completed == 4);
    assert_eq!((stats.requests_received, stats.requests_completed), (4, 4));
}

#[test]
fn a_later_pause_extends_the_running_one() {
    let server = start();
    let mut first = connect(&server);
    let mut second = connect(&server);
    let mut shorter = connect(&server);
    let start = Instant::now();
    first.send(b"GET /pause/200 HTTP/1.1\r\n\r\n");
    std::thread::sleep(50 * MS);
    // Ends at about 350 ms: later than the first, so the pause is extended.
    second.send(b"GET /pause/300 HTTP/1.1\r\n\r\n");
    std::thread::sleep(50 * MS);
    // Ends at about 110 ms: inside the running pause, so it changes nothing.
    shorter.send(b"GET /pause/10 HTTP/1.1\r\n\r\n");
    for client in [&mut first, &mut second, &mut shorter] {
        assert_eq!(client.response().status, 200);
        let at = start.elapsed();
        assert!(at + SLACK >= 350 * MS, "answered before the extended end: {at:?}");
        assert!(at < 700 * MS, "{at:?}");
    }
}

#[test]
fn pause_length_is_capped_like_sleep() {
    let server = start();
    let mut client = connect(&server);
    assert_eq!(client.get("/pause/3600001").status, 400);
    assert_eq!(client.get("/pause/soon").status, 400);
    let start = Instant::now();
    assert_eq!(client.get("/pause/0").status, 200);
    assert_eq!(client.get("/hi").body, b"world");
    assert!(start.elapsed() < 100 * MS, "{:?}", start.elapsed());
}

#[test]
fn max_inflight_makes_requests_wait_for_a_slot() {
    let server = start_with(Some(2));
    let mut clients: Vec<Client> = (0..4).map(|_| connect(&server)).collect();
    let start = Instant::now();
    let mut done: Vec<Duration> = std::thread::scope(|scope| {
        let waiting: Vec<_> = clients
            .iter_mut()
            .map(|client| {
                scope.spawn(move || {
                    let r = client.get("/sleep/200");
                    assert_eq!(r.status, 200);
                    start.elapsed()
                })
            })
            .collect();

        // Two requests sleep, two wait for a slot: `/stats` takes none.
        std::thread::sleep(50 * MS);
        let asked = Instant::now();
        let r = connect(&server).get("/stats");
        assert!(asked.elapsed() < 100 * MS, "/stats waited: {:?}", asked.elapsed());
        let json: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(json["requests_received"], 5, "{json}");
        assert_eq!(json["requests_completed"], 0, "{json}");

        waiting.into_iter().map(|t| t.join().unwrap()).collect()
    });
    done.sort();
    // Two waves of 200 ms.
    assert!(done[1] < 300 * MS, "first wave: {done:?}");
    assert!(done[2] + SLACK >= 400 * MS, "second wave too early: {done:?}");
    assert!(done[3] < 700 * MS, "{done:?}");
}

#[test]
fn max_inflight_of_one_still_answers_pipelined_requests() {
    // A connection's queued responses hold their slots until written; it
    // must write them rather than wait for a slot it holds itself.
    let server = start_with(Some(1));
    let mut client = connect(&server);
    client.send(&b"GET /hi HTTP/1.1\r\n\r\n".repeat(20));
    for _ in 0..20 {
        assert_eq!(client.response().body, b"world");
    }
    let mut other = connect(&server);
    assert_eq!(other.get("/sleep/1").status, 200);
}

#[test]
fn max_inflight_of_zero_is_refused() {
    let err = spawn(ServerOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        max_inflight: Some(0),
        ..Default::default()
    })
    .expect_err("a server that can handle nothing");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

// The JSON API under `/api/`, as a scenario test would use it.

impl Client {
    /// Sends a request with `fields` (whole `Name: value` lines) and a body,
    /// and reads the response.
    fn call(&mut self, method: &str, path: &str, fields: &[&str], body: &[u8]) -> Response {
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
        for field in fields {
            request.push_str(field);
            request.push_str("\r\n");
        }
        if !body.is_empty() {
            request.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        request.push_str("\r\n");
        let mut bytes = request.into_bytes();
        bytes.extend_from_slice(body);
        self.send(&bytes);
        self.response_to(method == "HEAD")
    }

    fn post_json(&mut self, path: &str, body: &str) -> Response {
        self.call("POST", path, &["Content-Type: application/json"], body.as_bytes())
    }
}

/// The body of a JSON response, after checking that it says it is JSON.
fn json(r: &Response) -> serde_json::Value {
    assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&r.body)))
}

fn user_ids(page: &serde_json::Value) -> Vec<u64> {
    page["users"]
        .as_array()
        .unwrap_or_else(|| panic!("no user list: {page}"))
        .iter()
        .map(|u| u["id"].as_u64().unwrap())
        .collect()
}

#[test]
fn api_login_returns_a_token_and_sets_a_session_cookie() {
    let server = start();
    let mut client = connect(&server);
    let r = client.post_json("/api/login", r#"{"username": "alice", "password": "secret"}"#);
    assert_eq!(r.status, 200);
    assert_eq!(
        json(&r),
        serde_json::json!({"token": "tok-alice", "user": "alice"})
    );
    assert_eq!(
        r.header("set-cookie"),
        Some("session=sess-alice; Path=/; HttpOnly")
    );
    assert_eq!(client.get("/hi").body, b"world", "still keep-alive");
}

#[test]
fn api_login_with_a_wrong_password_is_401() {
    let server = start();
    let mut client = connect(&server);
    let r = client.post_json("/api/login", r#"{"username": "alice", "password": "guess"}"#);
    assert_eq!(r.status, 401);
    assert_eq!(json(&r), serde_json::json!({"error": "bad credentials"}));
    assert_eq!(r.header("set-cookie"), None);
}

#[test]
fn api_login_with_a_malformed_body_is_400() {
    let server = start();
    let mut client = connect(&server);
    for body in [
        "",
        "username=alice&password=secret",
        r#"{"username": "alice""#,
        r#"{"username": "alice"}"#,
        r#"{"password": "secret"}"#,
        r#"["alice", "secret"]"#,
    ] {
        let r = client.post_json("/api/login", body);
        assert_eq!(r.status, 400, "{body:?}");
        assert!(json(&r)["error"].is_string(), "{body:?}");
    }
    // Only POST logs in.
    let r = client.get("/api/login");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("POST"));
}

#[test]
fn api_me_knows_the_session_cookie() {
    let server = start();
    let mut client = connect(&server);
    let login = client.post_json("/api/login", r#"{"username": "bob", "password": "secret"}"#);
    // What a cookie jar would send back: the pair before the attributes.
    let set_cookie = login.header("set-cookie").expect("a session cookie");
    let pair = set_cookie.split(';').next().unwrap();
    assert_eq!(pair, "session=sess-bob");

    let bob = serde_json::json!({"user": "bob"});
    let r = client.call("GET", "/api/me", &[&format!("Cookie: {pair}")], b"");
    assert_eq!((r.status, json(&r)), (200, bob.clone()));
    let r = client.call(
        "GET",
        "/api/me",
        &["Cookie: theme=dark; session=sess-bob; lang=en"],
        b"",
    );
    assert_eq!((r.status, json(&r)), (200, bob.clone()));
    let r = client.call(
        "GET",
        "/api/me",
        &["Cookie: theme=dark", "Cookie: session=sess-bob"],
        b"",
    );
    assert_eq!((r.status, json(&r)), (200, bob));
}

#[test]
fn api_me_knows_the_bearer_token() {
    let server = start();
    let mut client = connect(&server);
    let login = client.post_json("/api/login", r#"{"username": "carol", "password": "secret"}"#);
    let token = json(&login)["token"].as_str().unwrap().to_owned();
    let r = client.call(
        "GET",
        "/api/me",
        &[&format!("Authorization: Bearer {token}")],
        b"",
    );
    assert_eq!(r.status, 200);
    assert_eq!(json(&r), serde_json::json!({"user": "carol"}));
}

#[test]
fn api_me_without_credentials_is_401() {
    let server = start();
    let mut client = connect(&server);
    let r = client.get("/api/me");
    assert_eq!(r.status, 401);
    assert!(json(&r)["error"].is_string());
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    for wrong in [
        "Cookie: theme=dark",
        "Cookie: session=bob",
        "Authorization: Bearer sess-bob",
        "Authorization: Basic Ym9iOnNlY3JldA==",
    ] {
        assert_eq!(
            client.call("GET", "/api/me", &[wrong], b"").status,
            401,
            "{wrong}"
        );
    }
}

#[test]
fn api_users_are_listed_ten_per_page() {
    let server = start();
    let mut client = connect(&server);
    let r = client.get("/api/users");
    assert_eq!(r.status, 200);
    let first = json(&r);
    assert_eq!(user_ids(&first), (1..=10).collect::<Vec<_>>());
    assert_eq!(first["total"], 100);
    assert_eq!(
        first["users"][0],
        serde_json::json!({"id": 1, "name": "user-1", "email": "user-1@example.test"})
    );

    let second = json(&client.get("/api/users?page=2"));
    assert_eq!(user_ids(&second), (11..=20).collect::<Vec<_>>());
    assert_eq!(second["total"], 100);
    assert_eq!(second["users"][9]["email"], "user-20@example.test");

    let r = client.get("/api/users?page=11");
    assert_eq!(r.status, 200);
    assert_eq!(json(&r), serde_json::json!({"users": [], "total": 100}));

    assert_eq!(client.get("/api/users?page=0").status, 400);
    assert_eq!(client.get("/api/users?page=two").status, 400);
}

#[test]
fn api_head_of_users_has_the_length_but_no_body() {
    let server = start();
    let mut client = connect(&server);
    let full = client.get("/api/users");
    let head = client.call("HEAD", "/api/users", &[], b"");
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(full.body.len().to_string().as_str())
    );
    // A body would show up here, ahead of the next response.
    assert_eq!(client.get("/hi").body, b"world");
}

#[test]
fn api_user_by_id() {
    let server = start();
    let mut client = connect(&server);
    let r = client.get("/api/users/7");
    assert_eq!(r.status, 200);
    assert_eq!(
        json(&r),
        serde_json::json!({"id": 7, "name": "user-7", "email": "user-7@example.test"})
    );
    let r = client.get("/api/users/0");
    assert_eq!(r.status, 404);
    assert_eq!(json(&r), serde_json::json!({"error": "no such user"}));
    assert_eq!(client.get("/api/users/101").status, 404);
    let r = client.get("/api/users/abc");
    assert_eq!(r.status, 400);
    assert!(json(&r)["error"].is_string());
}

#[test]
fn api_create_user_answers_201() {
    let server = start();
    let mut client = connect(&server);
    let r = client.post_json("/api/users", r#"{"name": "dave", "role": "tester"}"#);
    assert_eq!(r.status, 201);
    assert_eq!(
        json(&r),
        serde_json::json!({"id": 101, "name": "dave", "created": true})
    );
    for bad in ["", "{", r#"{"role": "tester"}"#, r#""dave""#] {
        let r = client.post_json("/api/users", bad);
        assert_eq!(r.status, 400, "{bad:?}");
        assert!(json(&r)["error"].is_string());
    }
    // Nothing was stored.
    assert_eq!(client.get("/api/users/101").status, 404);
}

#[test]
fn api_echo_headers_shows_custom_headers_and_cookies() {
    let server = start();
    let mut client = connect(&server);
    let r = client.call(
        "GET",
        "/api/echo-headers",
        &["X-Scenario-Step: 3", "Cookie: session=sess-bob; theme=dark"],
        b"",
    );
    assert_eq!(r.status, 200);
    let headers = json(&r);
    assert_eq!(headers["x-scenario-step"], "3", "{headers}");
    assert_eq!(headers["cookie"], "session=sess-bob; theme=dark", "{headers}");
    assert_eq!(headers["host"], "test", "{headers}");
}

#[test]
fn api_requests_pipeline_with_the_rest() {
    let server = start();
    let mut client = connect(&server);
    let login = r#"{"username":"eve","password":"secret"}"#;
    let mut batch = format!(
        "POST /api/login HTTP/1.1\r\nContent-Length: {}\r\n\r\n{login}",
        login.len()
    )
    .into_bytes();
    batch.extend_from_slice(
        b"GET /api/me HTTP/1.1\r\nCookie: session=sess-eve\r\n\r\n\
          GET /hi HTTP/1.1\r\n\r\n\
          GET /api/users/3 HTTP/1.1\r\n\r\n",
    );
    client.send(&batch);
    assert_eq!(json(&client.response())["token"], "tok-eve");
    assert_eq!(json(&client.response())["user"], "eve");
    assert_eq!(client.response().body, b"world");
    assert_eq!(json(&client.response())["id"], 3);
}

#[test]
fn the_request_log_keeps_what_arrived_in_order() {
    let server = spawn(ServerOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        log_requests: true,
        ..Default::default()
    })
    .expect("server starts on 127.0.0.1:0");
    let mut client = connect(&server);
    assert_eq!(client.get("/hi?x=1").status, 200);
    let created = client.call("PATCH", "/api/users/3", &[], b"{\"a\":1}");
    assert_eq!(created.status, 405);
    assert_eq!(client.get("/nope").status, 404);
    let logged: Vec<(String, String, Vec<u8>)> = server
        .requests()
        .into_iter()
        .map(|r| (r.method, r.target, r.body))
        .collect();
    assert_eq!(
        logged,
        [
            ("GET".into(), "/hi?x=1".into(), vec![]),
            ("PATCH".into(), "/api/users/3".into(), b"{\"a\":1}".to_vec()),
            ("GET".into(), "/nope".into(), vec![]),
        ]
    );
    // Off unless asked for.
    let quiet = start();
    assert_eq!(connect(&quiet).get("/hi").status, 200);
    assert!(quiet.requests().is_empty());
}

#[test]
fn the_app_page_calls_the_api() {
    let server = start();
    let mut client = connect(&server);
    let page = client.get("/app");
    assert_eq!(page.status, 200);
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    let html = String::from_utf8(page.body).unwrap();
    for call in ["'/api/login'", "'/api/me'", "'/api/users'", "'/api/echo-headers'"] {
        assert!(html.contains(call), "{call}");
    }
    let css = client.get("/app.css");
    assert_eq!((css.status, css.header("content-type")), (200, Some("text/css")));
}
