//! A request as HTTP/2 sends it, derived from its HTTP/1.1 serialisation.
//!
//! Every request volley sends is first written as HTTP/1.1 bytes (the run's
//! one request, or a plan's templated ones), so HTTP/2 translates those
//! rather than keeping a second request builder: the request line becomes
//! the pseudo-headers, Host becomes `:authority`, connection-specific
//! headers are dropped (RFC 9113 section 8.2.2) and names are lower-cased.
//!
//! The header block uses only HPACK's static table and literals "without
//! indexing", so it depends on no connection's state: the run's request is
//! encoded once and the same bytes go out on every stream of every
//! connection.

use crate::sample::{ErrorKind, RequestError};

/// An encoded header block and the body that follows it.
#[derive(Clone, Debug, Default)]
pub struct H2Request {
    pub block: Vec<u8>,
    pub body: Vec<u8>,
    /// A HEAD request's response has no body.
    pub is_head: bool,
}

/// Headers that mean something only to an HTTP/1.1 connection.
const CONNECTION_SPECIFIC: [&str; 6] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Static-table indices (RFC 7541 appendix A) used below.
const AUTHORITY: u8 = 1;
const METHOD: u8 = 2;
const METHOD_GET: u8 = 2;
const METHOD_POST: u8 = 3;
const PATH: u8 = 4;
const SCHEME_HTTP: u8 = 6;
const SCHEME_HTTPS: u8 = 7;

impl H2Request {
    pub fn from_http1(http1: &[u8], https: bool) -> Result<H2Request, RequestError> {
        let mut request = H2Request::default();
        request.fill(http1, https)?;
        Ok(request)
    }

    /// Re-encodes `http1` into this request, reusing its buffers.
    pub fn fill(&mut self, http1: &[u8], https: bool) -> Result<(), RequestError> {
        let invalid = || {
            RequestError::new(
                ErrorKind::Protocol,
                crate::sample::ErrorDetail::Static("request cannot be sent over HTTP/2"),
            )
        };
        let mut slots = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut slots);
        let head_len = match parsed.parse(http1) {
            Ok(httparse::Status::Complete(len)) => len,
            _ => return Err(invalid()),
        };
        let (method, path) = (
            parsed.method.ok_or_else(invalid)?,
            parsed.path.ok_or_else(invalid)?,
        );
        self.block.clear();
        self.body.clear();
        self.is_head = method == "HEAD";
        match method {
            "GET" => indexed(&mut self.block, METHOD_GET),
            "POST" => indexed(&mut self.block, METHOD_POST),
            other => literal_indexed_name(&mut self.block, METHOD, other.as_bytes()),
        }
        indexed(&mut self.block, if https { SCHEME_HTTPS } else { SCHEME_HTTP });
        if let Some(host) = parsed
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("host"))
        {
            literal_indexed_name(&mut self.block, AUTHORITY, host.value);
        }
        literal_indexed_name(&mut self.block, PATH, path.as_bytes());
        for header in parsed.headers.iter() {
            if CONNECTION_SPECIFIC
                .iter()
                .any(|n| header.name.eq_ignore_ascii_case(n))
            {
                continue;
            }
            if header.name.eq_ignore_ascii_case("te") && !header.value.eq_ignore_ascii_case(b"trailers") {
                continue;
            }
            self.block.push(0); // literal without indexing, new name
            string(&mut self.block, header.name.as_bytes(), true);
            string(&mut self.block, header.value, false);
        }
        self.body.extend_from_slice(&http1[head_len..]);
        Ok(())
    }
}

/// An indexed field: the whole name and value from the static table.
fn indexed(out: &mut Vec<u8>, index: u8) {
    out.push(0x80 | index);
}

/// A literal without indexing whose name is a static-table entry.
fn literal_indexed_name(out: &mut Vec<u8>, name_index: u8, value: &[u8]) {
    debug_assert!(name_index < 15, "fits the 4-bit prefix");
    out.push(name_index);
    string(out, value, false);
}

/// A string literal, not Huffman-coded.
fn string(out: &mut Vec<u8>, bytes: &[u8], lowercase: bool) {
    integer(out, 0, 7, bytes.len());
    if lowercase {
        out.extend(bytes.iter().map(u8::to_ascii_lowercase));
    } else {
        out.extend_from_slice(bytes);
    }
}

/// An HPACK integer with an `prefix`-bit prefix after the `first` flag bits.
fn integer(out: &mut Vec<u8>, first: u8, prefix: u32, value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(block: &[u8]) -> Vec<(String, String)> {
        let mut decoder = httlib_hpack::Decoder::default();
        let mut out = Vec::new();
        decoder.decode(&mut block.to_vec(), &mut out).unwrap();
        out.into_iter()
            .map(|(n, v, _)| {
                (
                    String::from_utf8_lossy(&n).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn translates_a_request_line_and_headers() {
        let http1 = format!(
            "POST /api/x?y=1 HTTP/1.1\r\nHost: example.test:8443\r\nConnection: close\r\nX-Long: {}\r\nContent-Length: 2\r\n\r\nhi",
            "a".repeat(150)
        );
        let request = H2Request::from_http1(http1.as_bytes(), true).unwrap();
        let fields = decode(&request.block);
        let get = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        assert_eq!(get(":method"), Some("POST"));
        assert_eq!(get(":scheme"), Some("https"));
        assert_eq!(get(":authority"), Some("example.test:8443"));
        assert_eq!(get(":path"), Some("/api/x?y=1"));
        assert_eq!(get("x-long").map(str::len), Some(150));
        assert_eq!(get("content-length"), Some("2"));
        assert_eq!(get("connection"), None);
        assert_eq!(get("host"), None);
        assert_eq!(request.body, b"hi");
        assert!(!request.is_head);
        // Pseudo-headers come first.
        assert!(fields[..4].iter().all(|(n, _)| n.starts_with(':')));
    }

    #[test]
    fn other_methods_are_literals() {
        let request = H2Request::from_http1(b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n", false).unwrap();
        let fields = decode(&request.block);
        assert_eq!(fields[0], (":method".into(), "HEAD".into()));
        assert_eq!(fields[1], (":scheme".into(), "http".into()));
        assert!(request.is_head);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(H2Request::from_http1(b"not http", false).is_err());
    }
}
