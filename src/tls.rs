//! TLS client configuration: built once per run from the plan and shared by
//! every worker (an `Arc` clone per worker, nothing per request).

use crate::target::Target;
use rustls::pki_types::ServerName;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// TLS settings resolved from the plan.
#[derive(Clone)]
pub struct TlsSetup {
    connector: TlsConnector,
    server_name: ServerName<'static>,
}

impl TlsSetup {
    /// Verifies against the system's root certificates unless `insecure`.
    /// `alpn` lists the protocols offered, most preferred first (the
    /// protocol layer above knows what it speaks; this module does not).
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

    /// Starts the handshake on a connected socket.
    pub fn handshake(&self, tcp: TcpStream) -> tokio_rustls::Connect<TcpStream> {
        self.connector.connect(self.server_name.clone(), tcp)
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
