//! `--cacert` pinning: a server certificate that is exactly one of the
//! `--cacert` certificates is trusted without a path to a root, as curl
//! does; its name is still checked.
//!
//! `openssl req -x509` makes a self-signed certificate marked as a CA; given
//! with `--cacert`, the usual path verification refuses it as the server's
//! own certificate ("a CA certificate used as an end entity"). Every other
//! certificate is verified as before, by webpki against the roots, and the
//! handshake signatures are always checked.

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::sync::Arc;

#[derive(Debug)]
pub(super) struct PinnedOrVerified {
    pub(super) verified: Arc<WebPkiServerVerifier>,
    pub(super) pinned: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for PinnedOrVerified {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.pinned.iter().any(|pin| pin.as_ref() == end_entity.as_ref()) {
            // Pinned, but still for the name volley checks (the URL's host
            // or --sni), as curl checks it.
            let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_name(&parsed, server_name)?;
            return Ok(ServerCertVerified::assertion());
        }
        self.verified
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verified.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verified.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verified.supported_verify_schemes()
    }
}
