//! volley's HTTP/3 client against two HTTP/3 servers written independently
//! of it and of the embedded target (quinn and h3): aioquic (Python, its own
//! QUIC and QPACK; our server script is tests/h3/aioquic_server.py) and
//! Caddy (Go, quic-go; built by `.ci/caddy`). Each is started here on
//! 127.0.0.1 with a certificate the test makes, which volley trusts through
//! `--cacert`, and killed when the test ends, passed or failed.
//!
//! The checks: exact counts over several connections and streams, compared
//! with the server's own count; megabyte uploads and 100 kB responses
//! arriving whole; and aioquic's GOAWAY after a number of requests per
//! connection, whose refused streams volley sends again on new connections.
//!
//! The tools are found at `$VOLLEY_H3_PYTHON` (a Python with aioquic, else
//! `target/h3-venv/bin/python`) and `$VOLLEY_CADDY` (else `target/caddy`),
//! as `.ci/run` installs them; off CI a missing one skips its tests with a
//! note, on CI it fails them.

use super::support::{
    free_udp_and_tcp_port, num, schema_violations, stderr, summary, target, volley_json, wait_for_stats,
};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// How long a server may take to start, and to report its counts.
const START: Duration = Duration::from_secs(30);

/// The tool at `$var`, else at `fallback` under the repository; `None` (with
/// a note) when it is missing off CI.
fn tool(var: &str, fallback: &str, installs: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(fallback));
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must test HTTP/3 interop: no {} ({installs})",
        path.display()
    );
    eprintln!(
        "note: no {} ({installs}); this HTTP/3 interop check was skipped",
        path.display()
    );
    None
}

/// A self-signed certificate for 127.0.0.1 and its key, as PEM files in
/// `dir`; volley trusts the certificate itself through `--cacert`.
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("a certificate");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// A server process, killed when dropped (a failed assertion included);
/// its output's lines arrive on `lines`.
struct Server {
    child: Child,
    lines: Receiver<String>,
}

impl Server {
    fn start(mut command: Command, read: fn(&mut Child) -> Box<dyn std::io::Read + Send>) -> Server {
        let mut child = command
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{command:?} starts: {e}"));
        let out = BufReader::new(read(&mut child));
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Server { child, lines }
    }

    /// Waits for a line holding `text`; panics with what came before.
    fn wait_for(&mut self, text: &str) -> String {
        let deadline = Instant::now() + START;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(text) => return line,
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        let status = self.child.try_wait().ok().flatten();
        panic!(
            "no {text:?} from the server (exit: {status:?}); it said:\n{}",
            seen.join("\n")
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stdout_of(child: &mut Child) -> Box<dyn std::io::Read + Send> {
    Box::new(child.stdout.take().expect("piped stdout"))
}

fn stderr_of(child: &mut Child) -> Box<dyn std::io::Read + Send> {
    Box::new(child.stderr.take().expect("piped stderr"))
}

/// A volley HTTP/3 run of exactly `n` requests on two connections of
/// `streams` streams each (`extra`: more flags), every one of which must
/// succeed; its summary, after the checks every run here shares: protocol
/// h3, a valid report, `n` ok, no errors.
fn h3_run(cert: &Path, n: usize, streams: usize, url: &str, extra: &[&str]) -> Value {
    let (n_arg, streams_arg) = (n.to_string(), streams.to_string());
    let mut args = vec!["run", "--http3", "--cacert", cert.to_str().unwrap(), "-q"];
    args.extend(["-n", &n_arg, "-c", "2", "--streams", &streams_arg]);
    args.extend_from_slice(extra);
    args.push(url);
    let (out, report) = volley_json(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    assert_eq!(report["runs"][0]["protocol"], "h3");
    let violations = schema_violations(&report);
    assert!(violations.is_empty(), "{violations:?}");
    let s = summary(&report).clone();
    assert_eq!(num(&s["errors"]), 0.0, "{args:?}: {s}");
    assert_eq!(num(&s["ok"]), n as f64, "{args:?}: {s}");
    s
}

/// A volley HTTP/3 run of `n` requests, one connection at a time and a new
/// one per request (`extra`: more flags), every one of which must succeed;
/// its summary's `tls` object.
fn one_connection_at_a_time(cert: &Path, n: usize, url: &str, extra: &[&str]) -> Value {
    let n_arg = n.to_string();
    let mut args = vec!["run", "--http3", "--cacert", cert.to_str().unwrap(), "-q"];
    args.extend(["-n", &n_arg, "-c", "1", "--no-keepalive"]);
    args.extend_from_slice(extra);
    args.push(url);
    let (out, report) = volley_json(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let violations = schema_violations(&report);
    assert!(violations.is_empty(), "{violations:?}");
    let s = summary(&report);
    assert_eq!(
        (num(&s["ok"]), num(&s["errors"])),
        (n as f64, 0.0),
        "{args:?}: {s}"
    );
    s["tls"].clone()
}

/// A megabyte request body in `dir`.
fn megabyte_body(dir: &Path) -> String {
    let body = dir.join("body.bin");
    std::fs::write(&body, vec![b'v'; MEGABYTE]).unwrap();
    body.to_str().unwrap().to_string()
}

const MEGABYTE: usize = 1 << 20;

// --- aioquic -------------------------------------------------------------

/// tests/h3/aioquic_server.py (or another script there) on a free port,
/// ready.
pub(super) struct Aioquic {
    server: Server,
    port: u16,
}

impl Aioquic {
    fn start(python: &Path, dir: &Path, goaway_after: usize) -> (Aioquic, PathBuf) {
        let goaway_after = goaway_after.to_string();
        Aioquic::script(
            python,
            dir,
            "aioquic_server.py",
            &["--goaway-after", &goaway_after],
        )
    }

    /// `script` (in tests/h3, one that shares aioquic_server.py's arguments,
    /// "ready" and counts) with `args` on a free port, ready; and the
    /// certificate it serves.
    pub(super) fn script(python: &Path, dir: &Path, script: &str, args: &[&str]) -> (Aioquic, PathBuf) {
        let (cert, key) = certificate(dir);
        let port = free_udp_and_tcp_port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/h3")
            .join(script);
        let mut command = Command::new(python);
        command
            .arg(script)
            .args(["--port", &port.to_string()])
            .args(args)
            .arg("--cert")
            .arg(&cert)
            .arg("--key")
            .arg(&key)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut server = Server::start(command, stdout_of);
        server.wait_for("ready");
        (Aioquic { server, port }, cert)
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// Stops the server and returns its counts (requests answered, body
    /// bytes received, connections, GOAWAYs sent, streams refused).
    pub(super) fn counts(mut self) -> Value {
        // SAFETY: signals our own child process.
        unsafe { libc::kill(self.server.child.id() as i32, libc::SIGTERM) };
        let line = self.server.wait_for("\"requests\"");
        serde_json::from_str(&line).expect("the server's counts are JSON")
    }
}

pub(super) fn aioquic_python() -> Option<PathBuf> {
    tool(
        "VOLLEY_H3_PYTHON",
        "target/h3-venv/bin/python",
        ".ci/run installs aioquic into target/h3-venv",
    )
}

#[test]
fn aioquic_counts_every_request_over_streams() {
    let Some(python) = aioquic_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (server, cert) = Aioquic::start(&python, dir.path(), 0);
    let s = h3_run(&cert, 1000, 8, &server.url("/hi"), &[]);
    assert_eq!(num(&s["tls"]["handshakes"]), 2.0, "{s}");
    let counts = server.counts();
    assert_eq!(counts["requests"], 1000, "{counts}");
    assert_eq!(counts["connections"], 2, "{counts}");
}

#[test]
fn aioquic_takes_megabyte_uploads_and_sends_100_kb_bodies() {
    let Some(python) = aioquic_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (server, cert) = Aioquic::start(&python, dir.path(), 0);
    let body = megabyte_body(dir.path());
    let upload = ["-m", "POST", "--body-file", &body];
    let s = h3_run(&cert, 8, 2, &server.url("/echo"), &upload);
    // Each echo came back whole.
    assert!(num(&s["bytes"]) >= (8 * MEGABYTE) as f64, "{s}");
    let s = h3_run(&cert, 100, 4, &server.url("/bytes/100000"), &[]);
    assert!(num(&s["bytes"]) >= 100.0 * 100_000.0, "{s}");
    let counts = server.counts();
    assert_eq!(counts["requests"], 108, "{counts}");
    // Every upload arrived whole.
    assert_eq!(counts["body_bytes"], 8 * MEGABYTE, "{counts}");
}

/// aioquic sends GOAWAY after 25 requests on a connection and refuses the
/// streams beyond it: volley finishes the run on new connections, every
/// request answered once and none failed.
#[test]
fn aioquic_goaway_moves_the_run_to_new_connections() {
    let Some(python) = aioquic_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (server, cert) = Aioquic::start(&python, dir.path(), 25);
    let s = h3_run(&cert, 400, 8, &server.url("/hi"), &[]);
    let counts = server.counts();
    assert_eq!(counts["requests"], 400, "{counts}");
    // About 25 requests a connection (a few more where streams below the
    // GOAWAY's id arrive after it): far more connections than -c's two,
    // each a handshake of volley's.
    let connections = counts["connections"].as_u64().unwrap();
    assert!(connections >= 400 / 33, "{counts}");
    assert_eq!(num(&s["tls"]["handshakes"]), connections as f64, "{s} {counts}");
    assert!(num(&counts["goaways"]) >= (connections - 2) as f64, "{counts}");
    // With eight streams in flight, the GOAWAY finds streams above its id
    // already sent (on one connection or another): those were refused and
    // volley sent them again.
    assert!(num(&counts["refused"]) > 0.0, "{counts}");
}

/// Our aioquic server keeps no sessions, so it issues no tickets: no QUIC
/// handshake resumes, and `--0rtt` finds nothing to send early, yet every
/// request is answered once.
#[test]
fn aioquic_without_tickets_resumes_nothing() {
    let Some(python) = aioquic_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (server, cert) = Aioquic::start(&python, dir.path(), 0);
    let tls = one_connection_at_a_time(&cert, 10, &server.url("/hi"), &["--0rtt"]);
    assert_eq!(
        (
            num(&tls["handshakes"]),
            num(&tls["resumed"]),
            num(&tls["zero_rtt_tried"])
        ),
        (10.0, 0.0, 0.0),
        "{tls}"
    );
    let counts = server.counts();
    assert_eq!(
        (counts["requests"].as_u64(), counts["connections"].as_u64()),
        (Some(10), Some(10)),
        "{counts}"
    );
}

// --- Caddy ---------------------------------------------------------------

/// Caddy on a free port with a Caddyfile written here: HTTP/3 on by default
/// for its TLS site, the test's certificate, no ACME and no admin endpoint,
/// so nothing leaves the machine. Its JSON access log, one line per
/// request, is what the server counted.
struct Caddy {
    _server: Server,
    port: u16,
    log: PathBuf,
}

impl Caddy {
    /// `upstream`: where POST /echo is proxied (over HTTP/1.1).
    fn start(bin: &Path, dir: &Path, upstream: SocketAddr) -> (Caddy, PathBuf) {
        let (cert, key) = certificate(dir);
        let port = free_udp_and_tcp_port();
        let www = dir.join("www");
        std::fs::create_dir_all(&www).unwrap();
        std::fs::write(www.join("big"), vec![b'c'; 100_000]).unwrap();
        let log = dir.join("access.log");
        let caddyfile = dir.join("Caddyfile");
        std::fs::write(
            &caddyfile,
            format!(
                "{{
	admin off
	auto_https off
	persist_config off
	default_sni 127.0.0.1
}}
https://:{port} {{
	bind 127.0.0.1
	tls {cert} {key}
	log {{
		output file {log}
		format json
	}}
	respond /hi \"hi from caddy\" 200
	handle /big {{
		root * {www}
		file_server
	}}
	reverse_proxy /echo {upstream}
}}
",
                cert = cert.display(),
                key = key.display(),
                log = log.display(),
                www = www.display(),
            ),
        )
        .unwrap();
        let mut command = Command::new(bin);
        command
            .args(["run", "--adapter", "caddyfile", "--config"])
            .arg(&caddyfile)
            // Caddy keeps its state under these: the test's directory.
            .env("HOME", dir)
            .env("XDG_DATA_HOME", dir.join("data"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut server = Server::start(command, stderr_of);
        // Logged once every listener, QUIC's included, is up.
        server.wait_for("serving initial configuration");
        (
            Caddy {
                _server: server,
                port,
                log,
            },
            cert,
        )
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// The requests for `path` that Caddy logged as served over HTTP/3,
    /// once `want` have been logged or 5 s have passed.
    fn logged(&self, path: &str, want: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let count = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|e| e["request"]["uri"] == path && e["request"]["proto"] == "HTTP/3.0")
                .count();
            if count >= want || Instant::now() > deadline {
                return count;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn caddy_bin() -> Option<PathBuf> {
    tool("VOLLEY_CADDY", "target/caddy", ".ci/caddy builds it")
}

#[test]
fn caddy_counts_every_request_over_streams() {
    let Some(bin) = caddy_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let unused: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let (caddy, cert) = Caddy::start(&bin, dir.path(), unused);
    let s = h3_run(&cert, 2000, 8, &caddy.url("/hi"), &[]);
    assert_eq!(num(&s["tls"]["handshakes"]), 2.0, "{s}");
    assert_eq!(caddy.logged("/hi", 2000), 2000);
}

#[test]
fn caddy_proxies_megabyte_uploads_and_sends_100_kb_bodies() {
    let Some(bin) = caddy_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    // POST /echo goes on to the embedded target over HTTP/1.1, which
    // echoes the body and counts what it answered.
    let upstream = target();
    let (caddy, cert) = Caddy::start(&bin, dir.path(), upstream.addr());
    let body = megabyte_body(dir.path());
    let upload = ["-m", "POST", "--body-file", &body];
    let s = h3_run(&cert, 20, 2, &caddy.url("/echo"), &upload);
    assert!(num(&s["bytes"]) >= (20 * MEGABYTE) as f64, "{s}");
    let stats = wait_for_stats(&upstream, |st| st.requests_completed >= 20);
    assert_eq!(stats.requests_completed, 20);
    assert_eq!(caddy.logged("/echo", 20), 20);
    // /hi answers without reading the body and stops the upload
    // (STOP_SENDING): each stream must be reset, not sent on, or the
    // unread bodies fill Caddy's connection window and the run stalls.
    let timeout = ["--timeout", "10s"];
    let s = h3_run(&cert, 40, 2, &caddy.url("/hi"), &[&upload[..], &timeout].concat());
    assert!(
        num(&s["bytes"]) < (40 * 1000) as f64,
        "only the short answers came back: {s}"
    );
    assert_eq!(caddy.logged("/hi", 40), 40);
    let s = h3_run(&cert, 200, 4, &caddy.url("/big"), &[]);
    assert!(num(&s["bytes"]) >= 200.0 * 100_000.0, "{s}");
    assert_eq!(caddy.logged("/big", 200), 200);
}

/// Caddy (Go's TLS, quic-go) issues session tickets: one connection at a
/// time, every QUIC handshake after the first resumes. With `--0rtt` each
/// resumed connection sends its request as early data, which Caddy takes;
/// but it answers early data at once and sends its new ticket only once
/// the handshake is confirmed, after volley has its answer and (with
/// `--no-keepalive`) has closed: the next connection has no ticket left
/// and does a full handshake, so about every other one resumes. The counts
/// say so exactly: every resumed connection tried 0-RTT, and every one was
/// accepted.
#[test]
fn caddy_resumes_sessions_and_takes_0rtt() {
    let Some(bin) = caddy_bin() else { return };
    let dir = tempfile::tempdir().unwrap();
    let unused: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let (caddy, cert) = Caddy::start(&bin, dir.path(), unused);
    let tls = one_connection_at_a_time(&cert, 10, &caddy.url("/hi"), &[]);
    assert_eq!(
        (num(&tls["handshakes"]), num(&tls["resumed"])),
        (10.0, 9.0),
        "{tls}"
    );
    let tls = one_connection_at_a_time(&cert, 10, &caddy.url("/hi"), &["--0rtt"]);
    let resumed = num(&tls["resumed"]);
    assert_eq!(num(&tls["handshakes"]), 10.0, "{tls}");
    assert!(resumed >= 4.0, "at least every other connection: {tls}");
    assert_eq!(
        (num(&tls["zero_rtt_tried"]), num(&tls["zero_rtt_accepted"])),
        (resumed, resumed),
        "{tls}"
    );
    assert_eq!(caddy.logged("/hi", 20), 20, "each request served once");
}
