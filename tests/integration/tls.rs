//! `https://` targets: a minimal TLS server (rustls, certificates from
//! rcgen: self-signed, or issued by a test CA) on 127.0.0.1 answering every
//! request with `ok`, to check verification (`--insecure`, `--cacert`) and
//! its `tls` errors.

use super::support::{
    schema_violations, stderr, stdout, summary, target, url as url_of, volley, volley_json,
};
use rcgen::{CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub(super) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A test CA, its certificate written to `ca.pem` in a temporary folder
/// that lives as long as it does.
pub(super) struct Pki {
    dir: tempfile::TempDir,
    ca: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate the CA issued, with its key.
pub(super) struct Leaf {
    pub(super) chain: Vec<CertificateDer<'static>>,
    pub(super) key: PrivateKeyDer<'static>,
}

impl Pki {
    pub(super) fn new() -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        Pki { dir, ca }
    }

    pub(super) fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }

    /// The CA certificate's file, for `--cacert`.
    pub(super) fn ca_file(&self) -> String {
        self.path("ca.pem")
    }

    /// Issues a certificate for `names`; with `file`, also writes it and
    /// its key as `file.pem` and `file.key` (PKCS#8).
    pub(super) fn issue(&self, names: &[&str], usage: ExtendedKeyUsagePurpose, file: Option<&str>) -> Leaf {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        params.extended_key_usages = vec![usage];
        self.sign(params, file)
    }

    /// A server certificate for `names` that was valid through 2019 only.
    pub(super) fn expired_server_leaf(&self, names: &[&str]) -> Leaf {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = rcgen::date_time_ymd(2019, 1, 1);
        params.not_after = rcgen::date_time_ymd(2020, 1, 1);
        self.sign(params, None)
    }

    /// Signs `params` with the CA (`file` as for [`Pki::issue`]).
    fn sign(&self, params: CertificateParams, file: Option<&str>) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        if let Some(file) = file {
            std::fs::write(self.path(&format!("{file}.pem")), cert.pem()).unwrap();
            std::fs::write(self.path(&format!("{file}.key")), key.serialize_pem()).unwrap();
        }
        Leaf {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        }
    }

    /// A server certificate for `names`.
    pub(super) fn server_leaf(&self, names: &[&str]) -> Leaf {
        self.issue(names, ExtendedKeyUsagePurpose::ServerAuth, None)
    }

    /// A server config that requires a client certificate from this CA.
    pub(super) fn requiring_client_certs(&self, leaf: Leaf) -> rustls::ServerConfig {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .unwrap();
        rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(leaf.chain, leaf.key)
            .unwrap()
    }
}

/// A server config presenting `leaf`, asking no client certificate.
pub(super) fn server_config(leaf: Leaf) -> rustls::ServerConfig {
    rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(leaf.chain, leaf.key)
        .unwrap()
}

/// A server presenting a certificate for `names` from a fresh test CA.
fn issued_server(names: &[&str]) -> (Pki, Server) {
    let pki = Pki::new();
    let server = serve(server_config(pki.server_leaf(names)));
    (pki, server)
}

/// A self-signed certificate for `localhost`: trusted by nobody.
fn self_signed() -> Leaf {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    Leaf {
        chain: vec![cert.cert.der().clone()],
        key: PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap(),
    }
}

/// A self-signed CA certificate for `localhost`, as `openssl req -x509`
/// makes by default.
fn self_signed_ca() -> Leaf {
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    Leaf {
        chain: vec![params.self_signed(&key).unwrap().der().clone()],
        key: PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
    }
}

/// A running test server: its address and how many connections it accepted.
pub(super) struct Server {
    addr: SocketAddr,
    accepted: Arc<AtomicU64>,
}

impl Server {
    pub(super) fn port(&self) -> u16 {
        self.addr.port()
    }

    pub(super) fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Runs a test server at `addr` on a runtime of its own thread: `serve`,
/// given the counter of accepted connections. It lives until the test ends.
pub(super) fn serve_on_thread<F, S>(addr: SocketAddr, serve: S) -> Server
where
    S: FnOnce(Arc<AtomicU64>) -> F + Send + 'static,
    F: Future<Output = ()>,
{
    let accepted = Arc::new(AtomicU64::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(serve(counter));
    });
    Server { addr, accepted }
}

/// Starts a TLS server on its own thread; it lives until the test ends.
pub(super) fn serve(config: rustls::ServerConfig) -> Server {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    serve_on_thread(addr, move |counter| async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            counter.fetch_add(1, Ordering::SeqCst);
            // Else Nagle holds a response behind the unacknowledged
            // session tickets until the client's delayed ACK (40 ms).
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = tls.read(&mut chunk).await else { return };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    // Answer each complete request head (no bodies are sent here).
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let close = String::from_utf8_lossy(&buf[..end])
                            .to_ascii_lowercase()
                            .contains("connection: close");
                        buf.drain(..end + 4);
                        let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if tls.write_all(reply).await.is_err() || close {
                            let _ = tls.shutdown().await;
                            return;
                        }
                    }
                }
            });
        }
    })
}

/// `volley run -n requests` with a short timeout and `args`, its JSON
/// report read back.
fn run(requests: u64, args: &[&str]) -> (std::process::Output, Value) {
    let n = requests.to_string();
    let mut all = vec!["run", "--timeout", "5s", "-n", &n];
    all.extend_from_slice(args);
    volley_json(&all)
}

/// A run in which every request succeeded; its report.
pub(super) fn all_ok(requests: u64, args: &[&str]) -> Value {
    let (out, report) = run(requests, args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(summary(&report)["ok"], requests, "{}", summary(&report));
    report
}

/// A run in which every request failed as `tls`; the example message.
pub(super) fn all_tls_errors(requests: u64, args: &[&str]) -> String {
    let (out, report) = run(requests, args);
    let s = summary(&report);
    assert_eq!(s["errors_by_kind"]["tls"], requests, "{s}");
    assert_eq!(out.status.code(), Some(1), "nothing succeeded");
    s["error_examples"]["tls"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn insecure_accepts_a_self_signed_certificate() {
    let server = serve(server_config(self_signed()));
    let url = format!("https://localhost:{}/", server.port());
    all_ok(200, &["-c", "4", "--insecure", &url]);
}

#[test]
fn untrusted_certificate_is_a_tls_error() {
    let server = serve(server_config(self_signed()));
    let url = format!("https://localhost:{}/", server.port());
    let example = all_tls_errors(5, &["-c", "1", &url]);
    assert!(
        example.starts_with("certificate signed by an unknown issuer"),
        "{example}"
    );
}

#[test]
fn a_ca_certificate_as_the_servers_is_a_tls_error() {
    let server = serve(server_config(self_signed_ca()));
    let url = format!("https://localhost:{}/", server.port());
    let example = all_tls_errors(2, &["-c", "1", &url]);
    assert!(
        example.starts_with("the server's certificate is a CA certificate"),
        "{example}"
    );
}

#[test]
fn cacert_trusts_the_test_ca() {
    let (pki, server) = issued_server(&["localhost"]);
    let url = format!("https://localhost:{}/", server.port());
    let report = all_ok(20, &["-c", "2", "--cacert", &pki.ca_file(), &url]);
    assert_eq!(report["plan"]["cacert"], pki.ca_file());
}

#[test]
fn client_certificate_when_the_server_requires_one() {
    let pki = Pki::new();
    pki.issue(
        &["volley client"],
        ExtendedKeyUsagePurpose::ClientAuth,
        Some("client"),
    );
    let server = serve(pki.requiring_client_certs(pki.server_leaf(&["localhost"])));
    let url = format!("https://localhost:{}/", server.port());
    let (cert, key, ca) = (pki.path("client.pem"), pki.path("client.key"), pki.ca_file());
    all_ok(
        20,
        &["-c", "2", "--cacert", &ca, "--cert", &cert, "--key", &key, &url],
    );
    let example = all_tls_errors(3, &["-c", "1", "--cacert", &ca, &url]);
    assert!(example.contains("requires a client certificate"), "{example}");
}

#[test]
fn sni_names_the_certificate_to_verify() {
    let (pki, server) = issued_server(&["volley.test"]);
    let url = format!("https://127.0.0.1:{}/", server.port());
    let ca = pki.ca_file();
    let report = all_ok(10, &["-c", "1", "--cacert", &ca, "--sni", "volley.test", &url]);
    assert_eq!(report["plan"]["sni"], "volley.test");
    let example = all_tls_errors(3, &["-c", "1", "--cacert", &ca, "--sni", "wrong.example", &url]);
    let expected = "certificate not valid for name \"wrong.example\": it is for \"volley.test\"";
    assert!(example.starts_with(expected), "{example}");
}

#[test]
fn connect_to_keeps_the_urls_name() {
    let (pki, server) = issued_server(&["volley.test"]);
    // volley.test does not resolve, and nothing listens on port 1.
    let to = format!("127.0.0.1:{}", server.port());
    let ca = pki.ca_file();
    let report = all_ok(
        10,
        &[
            "-c",
            "2",
            "--connect-to",
            &to,
            "--cacert",
            &ca,
            "https://volley.test:1/",
        ],
    );
    assert_eq!(report["plan"]["connect_to"], to);
}

#[test]
fn handshakes_are_timed_and_resumed_by_default() {
    let (pki, server) = issued_server(&["localhost"]);
    let url = format!("https://localhost:{}/", server.port());
    let ca = pki.ca_file();
    // --http1.1: no ALPN probe connection before the run, so the server's
    // count is the run's connections alone.
    let report = all_ok(
        50,
        &["-c", "2", "--http1.1", "--no-keepalive", "--cacert", &ca, &url],
    );
    let problems = schema_violations(&report);
    assert!(problems.is_empty(), "{problems:#?}");
    let tls = &summary(&report)["tls"];
    assert_eq!(tls["handshakes"], 50, "one per connection: {tls}");
    assert_eq!(server.accepted(), 50, "a new connection per request");
    let resumed = tls["resumed"].as_u64().unwrap();
    assert!(
        resumed > 0 && resumed < 50,
        "the first cannot resume, later ones do: {tls}"
    );
    let (p50, max) = (
        tls["handshake_ms"]["p50"].as_f64().unwrap(),
        tls["handshake_ms"]["max"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && max >= p50, "{tls}");

    let text = stdout(&volley(&[
        "run", "-q", "-n", "5", "-c", "1", "--cacert", &ca, &url,
    ]));
    let line = text
        .lines()
        .find(|l| l.starts_with("TLS handshakes 1 (0 resumed)"));
    assert!(
        line.is_some_and(|l| l.contains("  mean ") && l.contains(" ms  p99 ")),
        "{text}"
    );
    let http = target();
    let plain = stdout(&volley(&[
        "run",
        "-q",
        "-n",
        "5",
        "-c",
        "1",
        &url_of(&http, "/hi"),
    ]));
    assert!(!plain.contains("TLS"), "no handshakes, no line: {plain}");
}

#[test]
fn no_tls_resume_makes_every_handshake_full() {
    let (pki, server) = issued_server(&["localhost"]);
    let url = format!("https://localhost:{}/", server.port());
    let ca = pki.ca_file();
    let report = all_ok(
        50,
        &[
            "-c",
            "2",
            "--http1.1",
            "--no-keepalive",
            "--no-tls-resume",
            "--cacert",
            &ca,
            &url,
        ],
    );
    let tls = &summary(&report)["tls"];
    assert_eq!(
        (tls["handshakes"].as_u64(), tls["resumed"].as_u64()),
        (Some(50), Some(0)),
        "{tls}"
    );
    assert_eq!(server.accepted(), 50);
    assert_eq!(report["plan"]["tls_resume"], false);
}

#[test]
fn connect_timeout_bounds_the_handshake() {
    // Accepts connections and never says a word.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for tcp in listener.incoming() {
            held.push(tcp);
        }
    });
    let url = format!("https://127.0.0.1:{port}/");
    let started = std::time::Instant::now();
    let example = all_tls_errors(2, &["-c", "1", "--insecure", "--connect-timeout", "300ms", &url]);
    assert!(
        example.contains("TLS handshake not finished within 300ms"),
        "{example}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn bad_tls_or_connect_flags_are_one_line_usage_errors() {
    let pki = Pki::new();
    pki.issue(&["a"], ExtendedKeyUsagePurpose::ClientAuth, Some("a"));
    pki.issue(&["b"], ExtendedKeyUsagePurpose::ClientAuth, Some("b"));
    let (cert, key, other_key) = (pki.path("a.pem"), pki.path("a.key"), pki.path("b.key"));
    let not_pem = pki.path("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let missing = pki.path("missing.pem");
    for (args, expected) in [
        (vec!["--cacert", missing.as_str()], "cannot read --cacert"),
        (vec!["--cacert", not_pem.as_str()], "holds no PEM certificate"),
        (vec!["--cert", cert.as_str()], "--cert needs --key"),
        (vec!["--key", key.as_str()], "--key needs --cert"),
        (
            vec!["--cert", cert.as_str(), "--key", cert.as_str()],
            "holds no unencrypted PEM private key",
        ),
        (
            vec!["--cert", key.as_str(), "--key", key.as_str()],
            "holds no PEM certificate",
        ),
        (
            vec!["--cert", cert.as_str(), "--key", other_key.as_str()],
            "is not the private key of --cert",
        ),
        (vec!["--sni", "not a name"], "invalid --sni 'not a name'"),
        (
            vec!["--connect-to", "127.0.0.1"],
            "invalid --connect-to '127.0.0.1': use HOST:PORT",
        ),
    ] {
        let mut all = vec!["run", "-n", "1"];
        all.extend(args.iter().copied());
        all.push("https://127.0.0.1:1/");
        let out = volley(&all);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    let out = volley(&[
        "run",
        "-n",
        "1",
        "--cacert",
        &pki.ca_file(),
        "http://127.0.0.1:1/",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--cacert goes with https://"),
        "{}",
        stderr(&out)
    );
}

/// Writes `cert` as PEM into `dir` and returns the file's path.
fn pem_file(dir: &tempfile::TempDir, cert: &CertificateDer<'_>) -> String {
    use base64::Engine;
    let body = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    let path = dir.path().join("pinned.pem");
    let pem = format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    );
    std::fs::write(&path, pem).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn cacert_pins_the_exact_self_signed_ca_certificate() {
    let leaf = self_signed_ca();
    let dir = tempfile::tempdir().unwrap();
    let pinned = pem_file(&dir, &leaf.chain[0]);
    let server = serve(server_config(leaf));
    let url = format!("https://localhost:{}/", server.port());
    all_ok(10, &["-c", "1", "--cacert", &pinned, &url]);
    // Another self-signed CA certificate is not the server's: still refused.
    let other = tempfile::tempdir().unwrap();
    let unrelated = pem_file(&other, &self_signed_ca().chain[0]);
    let example = all_tls_errors(2, &["-c", "1", "--cacert", &unrelated, &url]);
    assert!(
        example.starts_with("the server's certificate is a CA certificate"),
        "{example}"
    );
}

#[test]
fn a_failed_alpn_probe_reports_its_real_error() {
    let server = serve(server_config(self_signed()));
    let url = format!("https://localhost:{}/", server.port());
    let out = volley(&["run", "-n", "4", "--streams", "2", &url]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("probe connection") && err.contains("unknown issuer") && !err.contains("chose HTTP/1.1"),
        "{err}"
    );
}
