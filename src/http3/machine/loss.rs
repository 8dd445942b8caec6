//! The words for how an HTTP/3 connection or stream ended: HTTP/3's error
//! codes by name, and what a lost QUIC connection means for its streams.

use crate::sample::ErrorKind;
use quinn_proto::ConnectionError;

/// The name of an HTTP/3 error code (RFC 9114 8.1), or its number.
pub fn error_name(code: u64) -> String {
    const NAMES: [&str; 17] = [
        "H3_NO_ERROR",
        "H3_GENERAL_PROTOCOL_ERROR",
        "H3_INTERNAL_ERROR",
        "H3_STREAM_CREATION_ERROR",
        "H3_CLOSED_CRITICAL_STREAM",
        "H3_FRAME_UNEXPECTED",
        "H3_FRAME_ERROR",
        "H3_EXCESSIVE_LOAD",
        "H3_ID_ERROR",
        "H3_SETTINGS_ERROR",
        "H3_MISSING_SETTINGS",
        "H3_REQUEST_REJECTED",
        "H3_REQUEST_CANCELLED",
        "H3_REQUEST_INCOMPLETE",
        "H3_MESSAGE_ERROR",
        "H3_CONNECT_ERROR",
        "H3_VERSION_FALLBACK",
    ];
    match code.checked_sub(0x100).and_then(|i| NAMES.get(i as usize)) {
        Some(name) => (*name).to_string(),
        None if (0x200..0x300).contains(&code) => format!("QPACK error 0x{code:x}"),
        None => format!("error 0x{code:x}"),
    }
}

/// What a lost connection means for the streams on it, and the words for
/// it: a handshake that never completes is the connect's failure (or TLS's,
/// when either side refused the handshake; `refused` is why volley's
/// verifier did), an idle timeout or a close afterwards the stream's.
pub fn describe_loss(
    reason: &ConnectionError,
    connected: bool,
    refused: Option<&rustls::Error>,
) -> (ErrorKind, String) {
    let kind = |after: ErrorKind| if connected { after } else { ErrorKind::Connect };
    match reason {
        ConnectionError::TimedOut if !connected => (
            ErrorKind::Connect,
            "the QUIC handshake timed out (no answer from the server)".to_string(),
        ),
        ConnectionError::TimedOut => (
            ErrorKind::Timeout,
            "the QUIC connection went idle past its timeout".to_string(),
        ),
        ConnectionError::ApplicationClosed(close) => (
            kind(ErrorKind::Reset),
            format!(
                "the server closed the HTTP/3 connection ({})",
                error_name(close.error_code.into_inner())
            ),
        ),
        ConnectionError::ConnectionClosed(close) => {
            // CRYPTO_ERROR codes (0x100-0x1ff) carry the TLS alert the
            // server sent: worded as over TCP, where rustls reports it as
            // received, so a server that wants a client certificate says
            // to pass --cert and --key (quinn's text only gives the number).
            let code = u64::from(close.error_code);
            if (0x100..0x200).contains(&code) {
                let alert = rustls::AlertDescription::from(code as u8);
                (
                    ErrorKind::Tls,
                    crate::tls::describe(&rustls::Error::AlertReceived(alert)),
                )
            } else {
                (
                    kind(ErrorKind::Protocol),
                    format!("the server closed the QUIC connection: {close}"),
                )
            }
        }
        ConnectionError::TransportError(err) => {
            let code = u64::from(err.code);
            match refused {
                // The certificate volley refused, worded as over TCP.
                Some(refused) if (0x100..0x200).contains(&code) => {
                    (ErrorKind::Tls, crate::tls::describe(refused))
                }
                _ if (0x100..0x200).contains(&code) => (ErrorKind::Tls, format!("QUIC: {err}")),
                _ => (kind(ErrorKind::Protocol), format!("QUIC: {err}")),
            }
        }
        ConnectionError::Reset => (
            kind(ErrorKind::Reset),
            "the server reset the QUIC connection (stateless reset)".to_string(),
        ),
        other => (kind(ErrorKind::Reset), format!("QUIC: {other}")),
    }
}
