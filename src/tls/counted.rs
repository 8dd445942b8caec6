//! Telling a full TLS handshake from a resumed one where the session itself
//! cannot be asked: a full handshake is exactly the one in which the client
//! checks the server's certificate chain, so every verifier volley uses is
//! wrapped in [`Counted`], which counts those checks on the thread that
//! makes them.
//!
//! Over TCP rustls says `handshake_kind()`. quinn-proto keeps its rustls
//! session to itself and shows only the peer's certificates, which rustls
//! restores on a resumed session too. But a connection's handshake runs
//! inside the calls that hand its datagrams to quinn-proto, on the worker
//! thread that owns it, one connection at a time: [`verifications`] read
//! before and after such a call says whether that connection's certificate
//! was checked. The cost is one thread-local increment per full handshake.

use rustls::DigitallySignedStruct;
use rustls::SignatureScheme;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use std::cell::Cell;
use std::sync::Arc;

thread_local! {
    /// Server certificate chains checked on this thread, ever.
    static VERIFIED: Cell<u64> = const { Cell::new(0) };
}

/// How many server certificates this thread has checked so far (only a
/// difference between two readings means anything).
pub fn verifications() -> u64 {
    VERIFIED.with(Cell::get)
}

/// A verifier that counts its certificate checks in [`verifications`]; the
/// checks themselves are the wrapped verifier's.
#[derive(Debug)]
pub(super) struct Counted(pub(super) Arc<dyn ServerCertVerifier>);

impl ServerCertVerifier for Counted {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // Counted whatever the outcome: a refused certificate ends the
        // handshake, which then resumed nothing either.
        VERIFIED.with(|n| n.set(n.get() + 1));
        self.0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.0.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.0.root_hint_subjects()
    }
}
