//! Opening connections: TCP with a connect timeout, optionally wrapped in TLS.
//!
//! The TLS configuration is built once per run and shared by every worker
//! (an `Arc` clone per worker, nothing per request).

use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use crate::target::Target;
use rustls::pki_types::ServerName;
use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A connection to the target, plain or TLS.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// TLS settings resolved from the plan.
#[derive(Clone)]
pub struct TlsSetup {
    connector: TlsConnector,
    server_name: ServerName<'static>,
}

impl TlsSetup {
    /// Verifies against the system's root certificates unless `insecure`.
    pub fn new(target: &Target, insecure: bool, alpn: &[&[u8]]) -> Result<TlsSetup, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup failed: {e}"))?;
        let mut config = if insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
                .with_no_client_auth()
        } else {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err("no system root certificates found to verify TLS; install ca-certificates or pass --insecure".to_string());
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let server_name = ServerName::try_from(target.host.clone())
            .map_err(|e| format!("invalid TLS server name '{}': {e}", target.host))?;
        Ok(TlsSetup {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }
}

/// `--insecure`: accepts any certificate, still checks handshake signatures
/// so the connection is at least a well-formed TLS session.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Opens connections to one target for one worker.
pub struct Connector {
    addrs: Vec<SocketAddr>,
    /// The address that answered last, tried first next time, so a host
    /// resolving to an unused ::1 before 127.0.0.1 costs one failure, not one
    /// per connection.
    preferred: Cell<usize>,
    tls: Option<TlsSetup>,
    connect_timeout: Duration,
}

impl Connector {
    pub fn new(target: &Target, tls: Option<TlsSetup>, connect_timeout: Duration) -> Connector {
        Connector {
            addrs: target.addrs.clone(),
            preferred: Cell::new(0),
            tls,
            connect_timeout,
        }
    }

    /// Connects (and handshakes, for TLS) within the connect timeout.
    pub async fn connect(&self) -> Result<Stream, RequestError> {
        let tcp = match tokio::time::timeout(self.connect_timeout, self.connect_tcp()).await {
            Ok(result) => result?,
            Err(_) => {
                return Err(RequestError::new(
                    ErrorKind::Connect,
                    ErrorDetail::ConnectTimeout(self.connect_timeout),
                ));
            }
        };
        // Requests are small and latency matters more than segment count.
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => Ok(Stream::Plain(tcp)),
            Some(tls) => match tls.connector.connect(tls.server_name.clone(), tcp).await {
                Ok(stream) => Ok(Stream::Tls(Box::new(stream))),
                Err(err) => Err(RequestError::io(ErrorKind::Tls, err)),
            },
        }
    }

    async fn connect_tcp(&self) -> Result<TcpStream, RequestError> {
        let first = self.preferred.get();
        let mut last_err = None;
        for i in 0..self.addrs.len() {
            let index = (first + i) % self.addrs.len();
            match TcpStream::connect(self.addrs[index]).await {
                Ok(stream) => {
                    self.preferred.set(index);
                    return Ok(stream);
                }
                Err(err) => last_err = Some(err),
            }
        }
        let err = last_err.unwrap_or_else(|| io::Error::other("no address to connect to"));
        Err(RequestError::io(ErrorKind::Connect, err))
    }
}
