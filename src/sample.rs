//! One request's outcome, as the engine hands it to the recorder.
//!
//! A [`Sample`] is small and `Copy` so recording it never allocates; failures
//! are a closed set of [`ErrorKind`]s counted in a fixed array, never keyed by
//! strings (oha's error map keyed by message is the thing we avoid).

use std::fmt;

/// Why a request failed. The set is closed so the recorder can count kinds
/// in an array indexed by `kind as usize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The TCP connection could not be opened (refused, unreachable, timed out).
    Connect,
    /// No complete response within `--timeout`.
    Timeout,
    /// The server closed or reset the connection before the response was complete.
    Reset,
    /// A well-formed response whose status is not in `--status`.
    Status,
    /// The bytes received were not a valid HTTP/1.1 response.
    Protocol,
    /// The TLS handshake or record layer failed.
    Tls,
    /// Any other I/O failure on an established connection.
    Io,
    /// A scenario's `assert` did not hold (or its values were missing).
    Assert,
    /// A scenario's `exec` command could not start or exited non-zero.
    Exec,
    /// A script's callback failed, or its `request()` returned no request.
    Script,
}

impl ErrorKind {
    pub const COUNT: usize = 10;
    pub const ALL: [ErrorKind; Self::COUNT] = [
        ErrorKind::Connect,
        ErrorKind::Timeout,
        ErrorKind::Reset,
        ErrorKind::Status,
        ErrorKind::Protocol,
        ErrorKind::Tls,
        ErrorKind::Io,
        ErrorKind::Assert,
        ErrorKind::Exec,
        ErrorKind::Script,
    ];

    /// The stable name used in reports and the JSON contract.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Status => "status",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Tls => "tls",
            ErrorKind::Io => "io",
            ErrorKind::Assert => "assert",
            ErrorKind::Exec => "exec",
            ErrorKind::Script => "script",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed request: its kind plus what is needed to describe it once.
///
/// The description is built lazily (only for the first error of a kind in a
/// sampling interval), so a storm of identical failures costs no formatting.
#[derive(Debug)]
pub struct RequestError {
    pub kind: ErrorKind,
    pub detail: ErrorDetail,
}

/// The cause behind a [`RequestError`], cheap to construct.
#[derive(Debug)]
pub enum ErrorDetail {
    Io(std::io::Error),
    Static(&'static str),
    Status(u16),
    Timeout(std::time::Duration),
    ConnectTimeout(std::time::Duration),
    /// The TLS handshake outlasted what the connect timeout left of it.
    HandshakeTimeout(std::time::Duration),
    /// A message built when the error happened (scenario checks, rare).
    Text(String),
}

impl RequestError {
    pub fn new(kind: ErrorKind, detail: ErrorDetail) -> Self {
        RequestError { kind, detail }
    }

    pub fn io(kind: ErrorKind, err: std::io::Error) -> Self {
        RequestError::new(kind, ErrorDetail::Io(err))
    }

    pub fn protocol(what: &'static str) -> Self {
        RequestError::new(ErrorKind::Protocol, ErrorDetail::Static(what))
    }

    /// Classifies an I/O error met on an established connection.
    pub fn from_io(err: std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let kind = match err.kind() {
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof => ErrorKind::Reset,
            K::InvalidData if is_tls_error(&err) => ErrorKind::Tls,
            _ => ErrorKind::Io,
        };
        RequestError::io(kind, err)
    }

    /// One line describing the failure, for the report's example column.
    pub fn message(&self) -> String {
        match &self.detail {
            ErrorDetail::Io(e) => match rustls_error(e) {
                Some(tls) => crate::tls::describe(tls),
                None => e.to_string(),
            },
            ErrorDetail::Static(s) => (*s).to_string(),
            ErrorDetail::Status(code) => format!("unexpected status {code}"),
            ErrorDetail::Timeout(d) => {
                format!("no complete response within {}", humantime::format_duration(*d))
            }
            ErrorDetail::Text(text) => text.clone(),
            ErrorDetail::ConnectTimeout(d) => {
                format!(
                    "connection not established within {}",
                    humantime::format_duration(*d)
                )
            }
            ErrorDetail::HandshakeTimeout(d) => {
                format!(
                    "TLS handshake not finished within {} of connecting (--connect-timeout)",
                    humantime::format_duration(*d)
                )
            }
        }
    }
}

/// rustls reports its failures as `InvalidData` I/O errors wrapping a
/// `rustls::Error`; anything else with that kind is a framing problem.
fn is_tls_error(err: &std::io::Error) -> bool {
    rustls_error(err).is_some()
}

/// The `rustls::Error` an I/O error wraps, if any.
fn rustls_error(err: &std::io::Error) -> Option<&rustls::Error> {
    err.get_ref()?.downcast_ref::<rustls::Error>()
}

/// What one request produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A response with an expected status.
    Ok { status: u16 },
    /// A response, but with a status outside `--status`.
    BadStatus { status: u16 },
    /// No usable response.
    Failed(ErrorKind),
}

/// One finished request: timings and outcome. `Copy`, no heap.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// From the intended send (the actual send in the closed model) to the
    /// last byte of the response.
    pub latency_us: u64,
    /// From the actual send to the last byte of the response.
    pub service_us: u64,
    /// Response bytes read (status line, headers and body).
    pub bytes: u64,
    pub outcome: Outcome,
}
