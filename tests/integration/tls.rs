//! `https://` targets: a minimal TLS server (rustls, self-signed certificate
//! from rcgen) on 127.0.0.1 answering every request with `ok`, to check that
//! `--insecure` connects and that an untrusted certificate is a `tls` error.

use super::support::volley_json;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

/// Starts the TLS server on its own thread; it lives until the test ends.
fn tls_server() -> SocketAddr {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
    let config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
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
                            buf.drain(..end + 4);
                            let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                            if tls.write_all(reply).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
    });
    addr
}

#[test]
fn insecure_accepts_a_self_signed_certificate() {
    let addr = tls_server();
    let url = format!("https://localhost:{}/", addr.port());
    let (out, report) = volley_json(&[
        "run",
        "-n",
        "200",
        "-c",
        "4",
        "--insecure",
        "--timeout",
        "5s",
        &url,
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(report["runs"][0]["summary"]["ok"], 200);
}

#[test]
fn untrusted_certificate_is_a_tls_error() {
    let addr = tls_server();
    let url = format!("https://localhost:{}/", addr.port());
    let (out, report) = volley_json(&["run", "-n", "5", "-c", "1", "--timeout", "5s", &url]);
    let summary = &report["runs"][0]["summary"];
    assert_eq!(summary["errors_by_kind"]["tls"], 5, "{summary}");
    let example = summary["error_examples"]["tls"].as_str().unwrap();
    assert!(example.to_lowercase().contains("certificate"), "{example}");
    assert_eq!(out.status.code(), Some(1));
}
