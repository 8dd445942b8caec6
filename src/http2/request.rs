//! A request as HTTP/2 sends it, derived from its HTTP/1.1 serialisation.
//!
//! Every request volley sends is first written as HTTP/1.1 bytes (the run's
//! one request, or a plan's templated ones), so HTTP/2 translates those
//! rather than keeping a second request builder: the request line becomes
//! the pseudo-headers, Host becomes `:authority`, connection-specific
//! headers are dropped (RFC 9113 section 8.2.2) and names are lower-cased.
//!
//! [`H2Request::block`] uses only HPACK's static table and literals
//! "without indexing", so it depends on no connection's state. The run's
//! one request also gets an [`Indexed`] pair, encoded once before the run:
//! the first stream of a connection adds its fields to the server's dynamic
//! table, every later stream names them by index in a few bytes, as
//! browsers and h2load do, which spares the server parsing the same
//! literals on every request.

use crate::sample::{ErrorKind, RequestError};

/// An encoded header block and the body that follows it.
#[derive(Clone, Debug, Default)]
pub struct H2Request {
    pub block: Vec<u8>,
    pub body: Vec<u8>,
    /// A HEAD request's response has no body.
    pub is_head: bool,
    /// The same fields through the server's dynamic table, when they fit.
    pub indexed: Option<Indexed>,
}

/// A header block in two forms: the first adds the fields to the server's
/// dynamic table, the repeat names them by index.
#[derive(Clone, Debug, Default)]
pub struct Indexed {
    pub first: Vec<u8>,
    pub repeat: Vec<u8>,
}

/// The dynamic table size every HTTP/2 server starts with; volley indexes
/// only fields that fit in it together.
const DEFAULT_TABLE_SIZE: usize = 4096;
/// The first index of the dynamic table.
const FIRST_DYNAMIC: usize = 62;

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
        request.indexed = request.index();
        Ok(request)
    }

    /// The [`Indexed`] forms of `block`, or `None` when its fields do not
    /// fit the default table together.
    fn index(&self) -> Option<Indexed> {
        let mut fields = Vec::new();
        super::hpack::Decoder::default()
            .decode(&self.block, true, |n, v| fields.push((n.to_vec(), v.to_vec())))
            .ok()?;
        let static_only = |n: &[u8], v: &[u8]| match (n, v) {
            (b":method", b"GET") => Some(METHOD_GET),
            (b":method", b"POST") => Some(METHOD_POST),
            (b":scheme", b"http") => Some(SCHEME_HTTP),
            (b":scheme", b"https") => Some(SCHEME_HTTPS),
            (b":path", b"/") => Some(PATH),
            _ => None,
        };
        let added: Vec<&(Vec<u8>, Vec<u8>)> = fields
            .iter()
            .filter(|(n, v)| static_only(n, v).is_none())
            .collect();
        let size: usize = added.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
        if size > DEFAULT_TABLE_SIZE {
            return None;
        }
        let mut forms = Indexed::default();
        let mut position = 0;
        for (name, value) in &fields {
            if let Some(index) = static_only(name, value) {
                indexed(&mut forms.first, index);
                indexed(&mut forms.repeat, index);
                continue;
            }
            // Literal with incremental indexing: 01 and a 6-bit name index.
            match static_name(name) {
                Some(index) => integer(&mut forms.first, 0x40, 6, index as usize),
                None => {
                    forms.first.push(0x40);
                    string(&mut forms.first, name, false);
                }
            }
            string(&mut forms.first, value, false);
            // The newest entry is 62: the last added has the lowest index.
            let index = FIRST_DYNAMIC + added.len() - 1 - position;
            integer(&mut forms.repeat, 0x80, 7, index);
            position += 1;
        }
        Some(forms)
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

/// The static-table index of a pseudo-header name volley sends.
fn static_name(name: &[u8]) -> Option<u8> {
    match name {
        b":authority" => Some(AUTHORITY),
        b":method" => Some(METHOD),
        b":path" => Some(PATH),
        _ => None,
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

    /// The first form adds the fields to the table, the repeat names them:
    /// decoding first then repeat yields the same fields twice.
    #[test]
    fn indexed_forms_decode_to_the_same_fields() {
        let http1 = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8443\r\nUser-Agent: volley/0.1.0\r\nX-A: 1\r\n\r\n";
        let request = H2Request::from_http1(http1, true).unwrap();
        let plain = decode(&request.block);
        let indexed = request.indexed.as_ref().expect("small fields are indexed");
        assert!(indexed.repeat.len() <= 6, "{:?}", indexed.repeat);
        let mut decoder = httlib_hpack::Decoder::default();
        for block in [&indexed.first, &indexed.repeat, &indexed.repeat] {
            let mut out = Vec::new();
            decoder.decode(&mut block.clone(), &mut out).unwrap();
            let fields: Vec<(String, String)> = out
                .into_iter()
                .map(|(n, v, _)| {
                    (
                        String::from_utf8_lossy(&n).into_owned(),
                        String::from_utf8_lossy(&v).into_owned(),
                    )
                })
                .collect();
            assert_eq!(fields, plain);
        }
        // Fields too large for the default table together are not indexed.
        let big = format!("GET / HTTP/1.1\r\nHost: a\r\nX-Big: {}\r\n\r\n", "b".repeat(5000));
        assert!(
            H2Request::from_http1(big.as_bytes(), true)
                .unwrap()
                .indexed
                .is_none()
        );
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
