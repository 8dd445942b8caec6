//! Real metric receivers for the output tests, started on 127.0.0.1 by the
//! test itself: Debian's `prometheus` (installed by `.ci/run`), and a plain
//! HTTP GET to query them.
//!
//! Off CI a missing receiver skips its test with a note; on CI (`CI` set)
//! it fails, so the checks cannot silently stop running.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port nothing listens on right now (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on `addr`; the status and the body (a small HTTP/1.1 client
/// for the tests' own queries: `Connection: close`, body read to the end).
pub fn http_get(addr: SocketAddr, path_and_query: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        stream,
        "GET {path_and_query} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some((status, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// A Prometheus server with its own empty storage, stopped on drop.
pub struct Prometheus {
    child: Child,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether Debian's prometheus is installed; off CI its absence skips.
pub fn prometheus_installed() -> bool {
    let found = Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must test against a real Prometheus (.ci/run installs Debian's prometheus)"
        );
        eprintln!("note: prometheus is not installed (apt-get install prometheus); the check was skipped");
    }
    found
}

impl Prometheus {
    /// Starts a remote-write receiver; `native` turns native histograms on.
    pub fn start(native: bool) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        // No scrape targets: everything arrives by remote write.
        std::fs::write(&config, "global:\n  scrape_interval: 1h\n").unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut command = Command::new("prometheus");
        command
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--web.enable-remote-write-receiver")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if native {
            command.arg("--enable-feature=native-histograms");
        }
        let child = command.spawn().expect("prometheus starts");
        let prometheus = Prometheus {
            child,
            addr,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while http_get(addr, "/-/ready").map(|r| r.0) != Some(200) {
            assert!(
                Instant::now() < deadline,
                "prometheus on {addr} did not become ready"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        prometheus
    }

    pub fn write_url(&self) -> String {
        format!("http://{}/api/v1/write", self.addr)
    }

    /// An instant PromQL query's samples: (labels, value).
    pub fn query(&self, promql: &str) -> Vec<(Value, f64)> {
        let mut url = url::Url::parse("http://x/api/v1/query").unwrap();
        url.query_pairs_mut().append_pair("query", promql);
        let path = format!("{}?{}", url.path(), url.query().unwrap());
        let (status, body) = http_get(self.addr, &path).expect("prometheus answers");
        assert_eq!(status, 200, "{promql}: {body}");
        let json: Value = serde_json::from_str(&body).unwrap();
        json["data"]["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{promql}: {body}"))
            .iter()
            .map(|r| {
                (
                    r["metric"].clone(),
                    r["value"][1].as_str().unwrap().parse().unwrap(),
                )
            })
            .collect()
    }

    /// The one value of a query that must have exactly one.
    pub fn value(&self, promql: &str) -> f64 {
        let result = self.query(promql);
        assert_eq!(result.len(), 1, "{promql}: {result:?}");
        result[0].1
    }
}
