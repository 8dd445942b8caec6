//! The embedded target over HTTP/2 and TLS: h2c by prior knowledge on the
//! plain listener, and `tls: true` (`volley serve --tls`) with HTTP/1.1 or
//! HTTP/2 chosen by ALPN. Clients are the `h2` crate and tokio-rustls
//! trusting the server's own certificate; every server listens on 127.0.0.1
//! port 0 and every exchange has a time limit.

use std::future::Future;
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::{TlsConnector, client::TlsStream};
use volley::server::{ServerHandle, ServerOptions, StatsSnapshot, spawn};

use super::support::{num, summary, target, target_with, volley_json, wait_for_stats};

const MS: Duration = Duration::from_millis(1);
/// Upper bound for any one test's client side.
const LIMIT: Duration = Duration::from_secs(10);

/// Runs the client side of a test on a runtime of its own (the server has
/// its own thread), failing it if it outlives [`LIMIT`].
fn block_on<F: Future>(test: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { tokio::time::timeout(LIMIT, test).await })
        .expect("the test finishes in time")
}

/// An HTTP/2 client on `io`, its connection driven by a task of its own.
async fn h2_client<T>(io: T) -> SendRequest<Bytes>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (client, connection) = h2::client::handshake(io).await.expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// An h2c client: HTTP/2 with prior knowledge on a plain connection.
async fn h2c(server: &ServerHandle) -> SendRequest<Bytes> {
    h2_client(TcpStream::connect(server.addr()).await.unwrap()).await
}

/// An h2c client whose connection has answered a `/hi`: set up, so that
/// nothing timed waits for it, and the server's SETTINGS received.
async fn h2c_ready(server: &ServerHandle) -> SendRequest<Bytes> {
    let client = h2c(server).await;
    assert_eq!(get(&client, "/hi").await.unwrap().body, b"world");
    client
}

#[derive(Debug)]
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

async fn get(client: &SendRequest<Bytes>, path: &str) -> Result<Answer, h2::Error> {
    call(client, http::Request::get(uri(path)), b"").await
}

fn uri(path: &str) -> String {
    format!("http://localhost{path}")
}

/// Sends one request on a stream of its own and reads the whole answer.
async fn call(
    client: &SendRequest<Bytes>,
    request: http::request::Builder,
    body: &[u8],
) -> Result<Answer, h2::Error> {
    let mut client = client.clone().ready().await?;
    let (response, mut sending) = client.send_request(request.body(()).unwrap(), body.is_empty())?;
    if !body.is_empty() {
        sending.send_data(Bytes::copy_from_slice(body), true)?;
    }
    let (head, mut stream) = response.await?.into_parts();
    let mut body = Vec::new();
    while let Some(data) = stream.data().await {
        let data = data?;
        stream.flow_control().release_capacity(data.len())?;
        body.extend_from_slice(&data);
    }
    Ok(Answer {
        status: head.status.as_u16(),
        headers: head.headers,
        body,
    })
}

/// One request to `path` on a new h2c connection.
fn h2c_get(server: &ServerHandle, path: &str) -> Result<Answer, h2::Error> {
    block_on(async { get(&h2c(server).await, path).await })
}

#[test]
fn h2c_request_gets_hi() {
    let server = target();
    let answer = h2c_get(&server, "/hi").expect("an answer");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, b"world");
    assert_eq!(answer.header("content-type"), Some("text/plain"));
    assert_eq!(answer.header("content-length"), Some("5"));
    assert_eq!(answer.header("server"), Some("volley"));
}

#[test]
fn h2c_advertises_many_concurrent_streams() {
    let server = target();
    let advertised = block_on(async { h2c_ready(&server).await.current_max_send_streams() });
    assert!(advertised >= 256, "{advertised}");
}

/// `n` requests to `path` at once, each on a stream of its own on
/// `client`'s connection: their answers, each with when it came, counted
/// from when they were sent.
async fn at_once(client: &SendRequest<Bytes>, n: usize, path: &str) -> Vec<(Duration, Answer)> {
    let start = Instant::now();
    let streams: Vec<_> = (0..n)
        .map(|_| {
            let (client, path) = (client.clone(), path.to_string());
            tokio::spawn(async move {
                let answer = get(&client, &path).await.expect("an answer");
                (start.elapsed(), answer)
            })
        })
        .collect();
    let mut answers = Vec::new();
    for stream in streams {
        answers.push(stream.await.unwrap());
    }
    answers
}

#[test]
fn h2c_streams_of_one_connection_are_served_concurrently() {
    let server = target();
    let answers = block_on(async { at_once(&h2c_ready(&server).await, 20, "/sleep/100").await });
    assert_eq!(answers.len(), 20);
    for (_, answer) in &answers {
        assert_eq!((answer.status, &answer.body[..]), (200, &b"slept 100 ms\n"[..]));
    }
    let elapsed = answers.iter().map(|(at, _)| *at).max().unwrap();
    assert!(elapsed >= 100 * MS, "{elapsed:?}");
    assert!(elapsed < 500 * MS, "20 streams of 100 ms took {elapsed:?}");
    let stats = wait_for_stats(&server, |s| s.requests_completed == 21);
    assert_eq!((stats.connections_accepted, stats.h2_connections), (1, 1));
}

#[test]
fn stats_count_h2_connections_and_requests() {
    let server = target();
    let json = block_on(async {
        let client = h2c(&server).await;
        for _ in 0..5 {
            assert_eq!(get(&client, "/hi").await.unwrap().status, 200);
        }
        let stats = get(&client, "/stats").await.unwrap();
        assert_eq!(stats.header("content-type"), Some("application/json"));
        serde_json::from_slice::<serde_json::Value>(&stats.body).unwrap()
    });
    // `/stats` counts itself as received, not yet completed.
    assert_eq!(json["requests_received"], 6, "{json}");
    assert_eq!(json["requests_completed"], 5, "{json}");
    assert_eq!(json["h2_connections"], 1, "{json}");
    assert_eq!(json["http1_connections"], 0, "{json}");
    let stats = wait_for_stats(&server, |s| s.connections_closed == 1);
    assert_eq!(
        stats,
        StatsSnapshot {
            connections_accepted: 1,
            connections_closed: 1,
            http1_connections: 0,
            h2_connections: 1,
            h3_connections: 0,
            requests_received: 6,
            requests_completed: 6,
        }
    );
}

#[test]
fn h2c_runs_the_same_endpoints() {
    let server = target();
    block_on(async {
        let client = h2c(&server).await;

        let echo = http::Request::post(uri("/echo")).header("content-type", "text/x-test");
        let upload: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let answer = call(&client, echo, &upload).await.unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("content-type"), Some("text/x-test"));
        assert!(answer.body == upload, "the 3 MB body comes back as sent");

        let big = get(&client, "/bytes/300000").await.unwrap();
        assert_eq!(big.header("content-length"), Some("300000"));
        assert_eq!(big.body.len(), 300_000);
        assert!(big.body.iter().all(|&b| b == b'x'));

        let head = call(&client, http::Request::head(uri("/bytes/100")), b"")
            .await
            .unwrap();
        assert_eq!(head.header("content-length"), Some("100"));
        assert!(head.body.is_empty());

        let empty = get(&client, "/status/204").await.unwrap();
        assert_eq!(empty.status, 204);
        assert_eq!(empty.header("content-length"), None);
        assert!(empty.body.is_empty());

        assert_eq!(get(&client, "/status/503").await.unwrap().status, 503);
        assert_eq!(get(&client, "/nope").await.unwrap().status, 404);
        assert_eq!(get(&client, "/sleep/x").await.unwrap().status, 400);

        let login = http::Request::post(uri("/api/login"));
        let answer = call(&client, login, br#"{"username":"ann","password":"secret"}"#)
            .await
            .unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(
            answer.header("set-cookie"),
            Some("session=sess-ann; Path=/; HttpOnly")
        );
        let me = http::Request::get(uri("/api/me")).header("cookie", "session=sess-ann");
        assert_eq!(call(&client, me, b"").await.unwrap().body, br#"{"user":"ann"}"#);

        let start = Instant::now();
        let slow = get(&client, "/slow/200").await.unwrap();
        assert_eq!(slow.body, b"0123456789");
        assert!(start.elapsed() >= 180 * MS, "{:?}", start.elapsed());
    });
}

#[test]
fn h2c_body_over_the_limit_gets_413() {
    let server = target();
    let status = block_on(async {
        let client = h2c(&server).await;
        let mut client = client.ready().await.unwrap();
        let request = http::Request::post(uri("/echo"))
            .header("content-length", "100000000")
            .body(())
            .unwrap();
        // The body is announced, never sent: the server answers at once.
        let (response, _sending) = client.send_request(request, false).unwrap();
        response.await.unwrap().status().as_u16()
    });
    assert_eq!(status, 413);
    assert_eq!(server.stats().requests_received, 0);
}

#[test]
fn h2c_drop_closes_the_connection_without_goaway() {
    let server = target();
    let err = h2c_get(&server, "/drop").expect_err("no answer from /drop");
    assert!(!err.is_go_away(), "{err:?}");
    assert!(err.is_io(), "{err:?}");
}

#[test]
fn h2c_garbage_breaks_the_framing() {
    let server = target();
    let err = h2c_get(&server, "/garbage").expect_err("no answer from /garbage");
    // The client's frame decoder refused the bytes and gave up itself.
    assert!(err.is_library(), "{err:?}");
}

#[test]
fn h2c_stall_holds_only_its_own_stream() {
    let server = target();
    block_on(async {
        let client = h2c(&server).await;
        let stalled = tokio::spawn({
            let client = client.clone();
            async move { get(&client, "/stall").await }
        });
        tokio::time::sleep(50 * MS).await;
        let hi = get(&client, "/hi").await.unwrap();
        assert_eq!(hi.body, b"world", "the connection's other streams go on");
        tokio::time::sleep(250 * MS).await;
        assert!(!stalled.is_finished(), "/stall answered");
        stalled.abort();
    });
}

#[test]
fn pause_holds_h2_responses_too() {
    let server = target();
    block_on(async {
        let client = h2c_ready(&server).await;
        let start = Instant::now();
        let pause = tokio::spawn({
            let client = client.clone();
            async move { get(&client, "/pause/300").await }
        });
        tokio::time::sleep(50 * MS).await;
        assert_eq!(get(&client, "/hi").await.unwrap().body, b"world");
        let at = start.elapsed();
        assert!(at + 10 * MS >= 300 * MS, "answered during the pause: {at:?}");
        assert!(at < 600 * MS, "{at:?}");
        assert_eq!(pause.await.unwrap().unwrap().status, 200);
    });
}

#[test]
fn max_inflight_applies_to_h2_streams() {
    let server = target_with(Some(2));
    let answers = block_on(async { at_once(&h2c_ready(&server).await, 4, "/sleep/200").await });
    assert!(answers.iter().all(|(_, answer)| answer.status == 200));
    let mut done: Vec<Duration> = answers.iter().map(|(at, _)| *at).collect();
    done.sort();
    // Two waves of 200 ms.
    assert!(done[1] < 300 * MS, "first wave: {done:?}");
    assert!(done[2] + 10 * MS >= 400 * MS, "second wave too early: {done:?}");
    assert!(done[3] < 700 * MS, "{done:?}");
}

/// The target serving TLS on 127.0.0.1 port 0.
fn start_tls() -> ServerHandle {
    spawn(ServerOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        tls: true,
        ..Default::default()
    })
    .expect("TLS server starts on 127.0.0.1:0")
}

/// A TLS client that trusts only `server`'s certificate and offers `alpn`.
async fn tls_connect(server: &ServerHandle, name: &str, alpn: &[&[u8]]) -> TlsStream<TcpStream> {
    let pem = server.cert_pem().expect("a TLS server has a certificate");
    tls_connect_to(server.addr(), pem.as_bytes(), name, alpn).await
}

/// A TLS connection to `addr`, verified as `name` against the certificate
/// in `pem` alone, offering `alpn`.
async fn tls_connect_to(
    addr: std::net::SocketAddr,
    pem: &[u8],
    name: &str,
    alpn: &[&[u8]],
) -> TlsStream<TcpStream> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(pem).expect("a PEM certificate"))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from(name.to_string()).unwrap();
    TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("the certificate is trusted and the handshake completes")
}

/// One HTTP/1.1 `GET /hi` with `Connection: close`; the whole answer.
async fn http1_hi(stream: &mut TlsStream<TcpStream>) -> String {
    stream
        .write_all(b"GET /hi HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8(answer).unwrap()
}

#[test]
fn tls_serves_http1_when_alpn_asks_for_it() {
    let server = start_tls();
    assert!(server.url().starts_with("https://127.0.0.1:"), "{}", server.url());
    let (alpn, answer) = block_on(async {
        let mut stream = tls_connect(&server, "localhost", &[b"http/1.1"]).await;
        let alpn = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        (alpn, http1_hi(&mut stream).await)
    });
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
    assert!(answer.ends_with("\r\n\r\nworld"), "{answer:?}");
    let stats = wait_for_stats(&server, |s| s.requests_completed == 1);
    assert_eq!((stats.http1_connections, stats.h2_connections), (1, 0));
}

#[test]
fn tls_without_alpn_is_http1() {
    let server = start_tls();
    let (alpn, answer) = block_on(async {
        // By address: the certificate names 127.0.0.1 too.
        let mut stream = tls_connect(&server, "127.0.0.1", &[]).await;
        let alpn = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        (alpn, http1_hi(&mut stream).await)
    });
    assert_eq!(alpn, None);
    assert!(answer.ends_with("world"), "{answer:?}");
}

#[test]
fn tls_serves_h2_when_alpn_asks_for_it() {
    let server = start_tls();
    let (alpn, answer) = block_on(async {
        let stream = tls_connect(&server, "localhost", &[b"h2", b"http/1.1"]).await;
        let alpn = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let client = h2_client(stream).await;
        let request = http::Request::get("https://localhost/hi");
        (alpn, call(&client, request, b"").await.unwrap())
    });
    assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!((answer.status, &answer.body[..]), (200, &b"world"[..]));
    let stats = wait_for_stats(&server, |s| s.requests_completed == 1);
    assert_eq!((stats.http1_connections, stats.h2_connections), (0, 1));
}

#[test]
fn a_plain_server_has_no_certificate() {
    let server = target();
    assert_eq!(server.cert_pem(), None);
    assert_eq!(server.url(), format!("http://{}", server.addr()));
}

#[test]
fn volley_loads_a_tls_target() {
    let server = start_tls();
    let url = format!("{}/hi", server.url());
    let args = format!("run -n 200 -c 4 --insecure --timeout 5s {url}");
    let (out, report) = volley_json(&args.split(' ').collect::<Vec<_>>());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(num(&summary(&report)["ok"]), 200.0);
    // ALPN picks h2: the run's 4 connections and the probe before it.
    assert_eq!(report["runs"][0]["protocol"], "h2");
    assert_eq!(server.stats().h2_connections, 5);
    assert_eq!(server.stats().http1_connections, 0);
}

/// `volley serve` as a child process, killed when dropped.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_tls_prints_https_and_writes_the_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let mut served = Served(
        Command::new(env!("CARGO_BIN_EXE_volley"))
            .args(["serve", "--addr", "127.0.0.1:0", "--tls", "--cert-out"])
            .arg(&cert)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("volley serve starts"),
    );
    let stdout = served.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(LIMIT)
        .expect("volley serve says where it listens");
    let url = line
        .trim()
        .strip_prefix("volley serve: listening on ")
        .unwrap_or_else(|| panic!("{line:?}"));
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let pem = std::fs::read(&cert).expect("the certificate was written before serving");
    let addr = url.trim_start_matches("https://").parse().unwrap();
    let answer = block_on(async {
        let mut stream = tls_connect_to(addr, &pem, "localhost", &[]).await;
        http1_hi(&mut stream).await
    });
    assert!(answer.ends_with("world"), "{answer:?}");
}

#[test]
fn cert_out_without_tls_is_a_usage_error() {
    let out = super::support::volley(&["serve", "--addr", "127.0.0.1:0", "--cert-out", "x.pem"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--tls"), "{stderr}");
}

#[test]
fn h2_requests_are_logged_with_their_method() {
    let server = volley::server::spawn(volley::server::ServerOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        log_requests: true,
        ..Default::default()
    })
    .expect("server starts");
    let answer = block_on(async {
        let client = h2c(&server).await;
        let request = http::Request::builder()
            .method("DELETE")
            .uri(uri("/api/users/9?why=test"));
        call(&client, request, b"gone").await
    })
    .expect("an answer");
    assert_eq!(answer.status, 405);
    let logged = server.requests();
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(
        (
            logged[0].method.as_str(),
            logged[0].target.as_str(),
            &logged[0].body[..]
        ),
        ("DELETE", "/api/users/9?why=test", &b"gone"[..])
    );
}
