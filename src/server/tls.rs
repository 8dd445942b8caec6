//! TLS for `volley serve --tls`: a self-signed certificate made at start,
//! and ALPN offering HTTP/2 and HTTP/1.1.
//!
//! The target is for tests and demos on this machine, so a certificate made
//! on the spot for the names a local client uses is enough; clients trust it
//! through its PEM ([`Tls::cert_pem`]) or skip verification. rustls runs on
//! the ring provider, as the client side (`net`) does, so one provider is
//! built into volley.

use std::io;
use std::sync::Arc;

use rustls::pki_types::PrivateKeyDer;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::preface::Protocol;

/// The names the certificate is valid for: the ways a client on this
/// machine reaches the server.
const NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The server's TLS setup.
pub(super) struct Tls {
    pub acceptor: TlsAcceptor,
    /// The certificate, PEM-encoded, for clients to trust.
    pub cert_pem: String,
    cert: rustls::pki_types::CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
}

impl Tls {
    /// Makes a key and a self-signed certificate for [`NAMES`].
    ///
    /// # Errors
    ///
    /// Generating the key or certificate, or configuring rustls with them,
    /// failed.
    pub(super) fn self_signed() -> io::Result<Self> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            io::Error::other(format!("cannot set up TLS: {what}: {e}"))
        };
        let certified = rcgen::generate_simple_self_signed(NAMES.map(String::from).to_vec())
            .map_err(|e| failed("generating the certificate", &e))?;
        let key = PrivateKeyDer::try_from(certified.signing_key.serialize_der())
            .map_err(|e| failed("reading the generated key", &e))?;
        let mut tls = Self {
            acceptor: TlsAcceptor::from(Arc::new(
                rustls::ServerConfig::builder()
                    .with_no_client_auth()
                    .with_single_cert(vec![certified.cert.der().clone()], key.clone_key())
                    .map_err(|e| failed("using the certificate", &e))?,
            )),
            cert_pem: certified.cert.pem(),
            cert: certified.cert.der().clone(),
            key,
        };
        // In order of preference: a client that speaks both gets HTTP/2.
        tls.acceptor = TlsAcceptor::from(Arc::new(tls.rustls_config(&[b"h2", b"http/1.1"])?));
        Ok(tls)
    }

    /// A rustls configuration with the certificate, offering `alpn`.
    pub(super) fn rustls_config(&self, alpn: &[&[u8]]) -> io::Result<rustls::ServerConfig> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            io::Error::other(format!("cannot set up TLS: {what}: {e}"))
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| failed("choosing protocol versions", &e))?
            .with_no_client_auth()
            .with_single_cert(vec![self.cert.clone()], self.key.clone_key())
            .map_err(|e| failed("using the certificate", &e))?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }
}

/// The protocol the handshake settled on: HTTP/2 if ALPN chose `h2`;
/// HTTP/1.1 if it chose `http/1.1` or the client offered no ALPN at all.
pub(super) fn negotiated<S>(stream: &TlsStream<S>) -> Protocol {
    match stream.get_ref().1.alpn_protocol() {
        Some(b"h2") => Protocol::Http2,
        _ => Protocol::Http1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_is_made_and_offers_both_protocols() {
        let tls = Tls::self_signed().expect("TLS set up");
        assert!(
            tls.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"),
            "{}",
            tls.cert_pem
        );
        assert_eq!(
            tls.acceptor.config().alpn_protocols,
            [b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }
}
