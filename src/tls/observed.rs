//! What the certificate verifier saw, kept on the thread for QUIC: whether
//! it checked a certificate at all, and why it refused one.
//!
//! Over TCP rustls says `handshake_kind()` and the handshake's
//! `rustls::Error` reaches the request as it is. quinn-proto keeps its
//! rustls session to itself: it shows only the peer's certificates (which
//! rustls restores on a resumed session too) and only the text of an
//! error. But a QUIC connection's handshake runs inside the calls that hand
//! its datagrams to quinn-proto, on the worker thread that owns it, one
//! connection at a time. So every verifier volley uses is wrapped in
//! [`Observed`], which leaves two things on that thread:
//!
//! - a count of certificate checks ([`verifications`]): a full handshake is
//!   exactly the one in which the client checks the server's chain, so the
//!   count read before and after a connection's datagrams are handled says
//!   whether it resumed (one thread-local increment per full handshake);
//! - the last refusal ([`take_refusal`]), which the connection picks up
//!   right after, to word a refused certificate as over TCP.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};
use std::cell::Cell;
use std::sync::Arc;

thread_local! {
    /// Server certificate chains checked on this thread, ever.
    static VERIFIED: Cell<u64> = const { Cell::new(0) };
    /// The last refusal of a verifier on this thread, not yet taken.
    static REFUSED: Cell<Option<Error>> = const { Cell::new(None) };
}

/// How many server certificates this thread has checked so far (only a
/// difference between two readings means anything).
pub fn verifications() -> u64 {
    VERIFIED.with(Cell::get)
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

/// A verifier that does what the wrapped one does, counting its
/// certificate checks in [`verifications`] and leaving each refusal on the
/// thread for [`take_refusal`].
#[derive(Debug)]
pub(super) struct Observed(pub(super) Arc<dyn ServerCertVerifier>);

impl Observed {
    fn kept<T>(result: Result<T, Error>) -> Result<T, Error> {
        if let Err(err) = &result {
            REFUSED.set(Some(err.clone()));
        }
        result
    }
}

impl ServerCertVerifier for Observed {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        // Counted whatever the outcome: a refused certificate ends the
        // handshake, which then resumed nothing either.
        VERIFIED.with(|n| n.set(n.get() + 1));
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
        let verifier = Observed(webpki);
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
