//! Why the certificate verifier refused a server, kept for QUIC.
//!
//! Over TCP the handshake's `rustls::Error` reaches the request as it is,
//! and [`super::describe`] words it. Over QUIC quinn-proto keeps only its
//! text (in the connection's close reason), so a refused certificate would
//! read as rustls' wording after quinn's. The verifier therefore leaves its
//! refusal with the thread it ran on, and the QUIC connection, whose
//! handshake runs synchronously on that thread while it hands quinn-proto a
//! datagram, picks it up right after: no other connection can verify in
//! between, as nothing else runs on the thread meanwhile.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};
use std::cell::Cell;
use std::sync::Arc;

thread_local! {
    /// The last refusal of a verifier on this thread, not yet taken.
    static REFUSED: Cell<Option<Error>> = const { Cell::new(None) };
}

/// Forgets any refusal left on this thread (by a TCP handshake, whose error
/// went its own way), before a QUIC connection handles a datagram.
pub fn forget_refusal() {
    REFUSED.take();
}

/// Why the verifier refused a server on this thread since
/// [`forget_refusal`], if it did.
pub fn take_refusal() -> Option<Error> {
    REFUSED.take()
}

/// A verifier that does what `inner` does and leaves each refusal on the
/// thread for [`take_refusal`].
#[derive(Debug)]
pub(super) struct Remembering(pub(super) Arc<dyn ServerCertVerifier>);

impl Remembering {
    fn kept<T>(result: Result<T, Error>) -> Result<T, Error> {
        if let Err(err) = &result {
            REFUSED.set(Some(err.clone()));
        }
        result
    }
}

impl ServerCertVerifier for Remembering {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Self::kept(
            self.0
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now),
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        Self::kept(self.0.verify_tls12_signature(message, cert, dss))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        Self::kept(self.0.verify_tls13_signature(message, cert, dss))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.0.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[DistinguishedName]> {
        self.0.root_hint_subjects()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verifier trusting one self-signed certificate refuses another.
    #[test]
    fn a_refusal_is_taken_once_on_its_own_thread() {
        let make = || rcgen::generate_simple_self_signed(vec!["volley.test".to_string()]).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(make().cert.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        let verifier = Remembering(webpki);
        let stranger = make();
        let name = ServerName::try_from("volley.test").unwrap();
        let refused = || {
            verifier
                .verify_server_cert(stranger.cert.der(), &[], &name, &[], UnixTime::now())
                .unwrap_err()
        };
        let err = refused();
        assert!(matches!(err, Error::InvalidCertificate(_)), "{err:?}");
        assert_eq!(take_refusal(), Some(err));
        assert_eq!(take_refusal(), None);
        refused();
        forget_refusal();
        assert_eq!(take_refusal(), None);
        refused();
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(take_refusal(), None));
        });
    }
}
