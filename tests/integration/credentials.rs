//! Credentials in the URL (`http://user:pass@host/`): sent as Basic
//! `Authorization` as curl sends them (a user's own `-H Authorization`
//! wins), and the password never shown: not on the terminal, in the JSON
//! or HTML report, on the live dashboard or in an error line.

use super::support::{stderr, stdout, summary, target, volley, volley_json};
use base64::Engine as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const PASSWORD: &str = "s3cret-Pw";
/// base64("user:s3cret-Pw")
const BASIC: &str = "Basic dXNlcjpzM2NyZXQtUHc=";

/// `http://user:PASSWORD@ADDR{path}`.
fn with_credentials(addr: SocketAddr, path: &str) -> String {
    format!("http://user:{PASSWORD}@{addr}{path}")
}

/// A server that answers `200` to requests with our credentials, `401` to
/// others, and sends each request head it read down `heads`.
fn capture_heads() -> (SocketAddr, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let tx = tx.clone();
            std::thread::spawn(move || answer_and_report(conn, tx));
        }
    });
    (addr, rx)
}

fn answer_and_report(mut conn: TcpStream, heads: mpsc::Sender<String>) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let head: Vec<u8> = seen.drain(..end + 4).collect();
            let _ = heads.send(String::from_utf8_lossy(&head).into_owned());
            if conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .is_err()
            {
                return;
            }
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// The `authorization` lines of the first request head.
fn authorization_lines(heads: &mpsc::Receiver<String>) -> Vec<String> {
    let head = heads.recv_timeout(Duration::from_secs(5)).expect("a request");
    head.lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("authorization:"))
        .map(str::to_string)
        .collect()
}

#[test]
fn url_credentials_are_sent_as_basic_auth() {
    let (addr, heads) = capture_heads();
    let out = volley(&["run", "-n", "2", "-c", "1", "-q", &with_credentials(addr, "/x")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(authorization_lines(&heads), [format!("Authorization: {BASIC}")]);

    let (addr, heads) = capture_heads();
    let out = volley(&[
        "run",
        "-n",
        "2",
        "-c",
        "1",
        "-q",
        "-H",
        "Authorization: Bearer mine",
        &with_credentials(addr, "/x"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(authorization_lines(&heads), ["Authorization: Bearer mine"]);
}

#[test]
fn k8s_pods_get_the_credentials_from_a_secret_that_is_never_printed() {
    let (addr, heads) = capture_heads();
    let _quiet = super::support::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let merged = dir.path().join("merged.json");
    let target_url = with_credentials(addr, "/");
    let args = [
        "k8s",
        "run",
        "--start-lead",
        "2s",
        "--timeout",
        "40s",
        "-o",
        merged.to_str().unwrap(),
        "--name",
        "auth",
        "--shards",
        "2",
        "run",
        &target_url,
        "-n",
        "20",
        "-c",
        "2",
        "-t",
        "1",
    ];
    let out = super::k8s::volley_with_fake_kubectl(dir.path(), &args, None);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let report = super::support::read_report(&merged);
    assert_eq!(summary(&report)["status"]["200"], 20, "{}", summary(&report));
    assert_eq!(authorization_lines(&heads), [format!("Authorization: {BASIC}")]);
    let calls = std::fs::read_to_string(dir.path().join("cluster/calls.log")).unwrap();
    assert!(calls.starts_with("apply -f -\napply -f "), "{calls}");
    assert!(
        calls.contains("delete secret auth-credentials --ignore-not-found"),
        "{calls}"
    );
    let shown = format!("{}{}{calls}{report}", stdout(&out), stderr(&out));
    assert!(!shown.contains(PASSWORD), "{shown}");
    assert!(shown.contains("user:***@"), "{shown}");
}

#[test]
fn a_plan_s_base_credentials_are_sent_over_both_protocols() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("auth.yml");
    std::fs::write(
        &plan,
        format!(
            "iterations: 2\nplan:\n  - name: Echo\n    request:\n      url: /api/echo-headers\n    assign: seen\n  - name: Echo again\n    request:\n      url: '{{{{ base }}}}/api/echo-headers'\n    assign: again\n  - name: Sent again\n    assert: {{key: again.body.authorization, value: '{BASIC}'}}\n  - name: Sent\n    assert: {{key: seen.body.authorization, value: '{BASIC}'}}\n  - name: Wrong\n    assert: {{key: seen.body.authorization, value: 'Basic d3Jvbmc='}}\n"
        ),
    )
    .unwrap();
    for http in ["--http1.1", "--http2"] {
        let base = with_credentials(server.addr(), "");
        let (out, report) = volley_json(&["plan", plan.to_str().unwrap(), "--base", &base, http, "-q"]);
        assert!(out.status.success(), "{http}: {}", stderr(&out));
        let steps = report["runs"][0]["steps"].as_array().unwrap();
        let errors = |name: &str| {
            let step = steps.iter().find(|s| s["name"] == name).unwrap();
            step["summary"]["errors"].as_u64().unwrap()
        };
        // The check is live: an assertion on the wrong value fails.
        assert_eq!((errors("Sent"), errors("Wrong")), (0, 2), "{http}: {report}");
        // `{{ base }}` stands for the origin without the credentials.
        assert_eq!(
            (errors("Echo again"), errors("Sent again")),
            (0, 0),
            "{http}: {report}"
        );
        let text = format!("{}{}{report}", stdout(&out), stderr(&out));
        assert!(!text.contains(PASSWORD), "{http}: {text}");
    }
}

/// The events the dashboard at `addr` streams until the run closes them.
fn dashboard_events(addr: &str) -> String {
    let mut conn = TcpStream::connect(addr.trim_start_matches("http://").trim_end_matches('/')).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    conn.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    let _ = conn.read_to_string(&mut text);
    text
}

/// The run's data inside an HTML report (gzip, then base64).
fn html_data(html: &str) -> String {
    let start = html
        .find("id=\"volley-data\"")
        .expect("the page carries its data");
    let body = &html[start..];
    let body = &body[body.find('>').unwrap() + 1..body.find("</script>").unwrap()];
    let gz = base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .unwrap();
    text
}

#[test]
fn the_password_is_masked_in_every_output() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let html = dir.path().join("run.html");
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args([
            "run",
            "-d",
            "2s",
            "-c",
            "1",
            "-v",
            "--interval",
            "250ms",
            "--dashboard=127.0.0.1:0",
            "-o",
            json.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            &with_credentials(server.addr(), "/status/401"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let err = BufReader::new(child.stderr.take().unwrap());
    let err_thread = std::thread::spawn(move || {
        let mut all = String::new();
        for line in err.lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("dashboard: ") {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
            all += &line;
            all.push('\n');
        }
        all
    });
    let dashboard = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the dashboard's address");
    let events = dashboard_events(&dashboard);
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().code().is_some());
    let err = err_thread.join().unwrap();
    let report = std::fs::read_to_string(&json).unwrap();
    let page = std::fs::read_to_string(&html).unwrap();
    let data = html_data(&page);
    let masked = format!("user:***@{}", server.addr());
    for (what, text) in [
        ("stdout", &out),
        ("stderr", &err),
        ("JSON report", &report),
        ("HTML page", &page),
        ("HTML data", &data),
        ("dashboard", &events),
    ] {
        assert!(!text.contains(PASSWORD), "{what} shows the password: {text}");
        assert!(
            !text.contains(&BASIC[6..]),
            "{what} shows the encoded credentials"
        );
        if what != "HTML page" {
            assert!(text.contains(&masked), "{what} names no masked URL: {text}");
        }
    }
    // The server's 401 was an error with an example line; it is masked too.
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(
        summary(&report)["status"]["401"].as_u64().map(|n| n > 0),
        Some(true)
    );
}

#[test]
fn error_lines_mask_the_password() {
    for bad in [
        format!("ftp://user:{PASSWORD}@127.0.0.1/"),
        format!("http://user:{PASSWORD}@127.0.0.1:99999/"),
        format!("http://user:{PASSWORD}@[::1/"),
    ] {
        let out = volley(&["run", "-n", "1", &bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(!err.contains(PASSWORD), "{err}");
    }
    // A target that refuses connections: the run's error lines.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let out = volley(&["run", "-n", "2", "-c", "1", &with_credentials(addr, "/")]);
    assert!(!out.status.success());
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!all.contains(PASSWORD) && all.contains("user:***@"), "{all}");
}
