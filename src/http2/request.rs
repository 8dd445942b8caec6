//! A [`Request`] as HTTP/2 sends it: a header block and the body.
//!
//! The request's method, scheme, authority and path become the
//! pseudo-headers; its fields follow with names lower-cased, and those
//! that mean something only to an HTTP/1.1 connection are dropped (RFC
//! 9113 section 8.2.2). The fields are encoded straight from the request,
//! and checked the way an HTTP/1.1 parser would check them (a field HTTP/2
//! cannot carry is an error, never a malformed frame on the wire); values
//! lose the spaces around them, as on HTTP/1.1.
//!
//! [`H2Request::block`] uses only HPACK's static table and literals
//! "without indexing", so it depends on no connection's state. The run's
//! one request also gets an [`Indexed`] pair, encoded once before the run:
//! the first stream of a connection adds its fields to the server's dynamic
//! table, every later stream names them by index in a few bytes, as
//! browsers and h2load do, which spares the server parsing the same
//! literals on every request.

use crate::request::Request;
use crate::sample::{ErrorDetail, ErrorKind, RequestError};

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
    /// The run's one request, encoded once before the run: its block and,
    /// when its fields fit the server's table, their `Indexed` forms.
    pub fn new(request: &Request) -> Result<H2Request, RequestError> {
        let mut encoded = H2Request::default();
        encoded.encode(request)?;
        let mut fields = Vec::new();
        each_field(request, |n, v| fields.push((n.to_ascii_lowercase(), v.to_vec())))?;
        encoded.indexed = index(&fields);
        Ok(encoded)
    }

    /// Encodes `request` into this one, reusing its buffers (a plan's
    /// request, for each send); no indexed forms.
    pub fn encode(&mut self, request: &Request) -> Result<(), RequestError> {
        self.block.clear();
        self.body.clear();
        self.indexed = None;
        self.is_head = request.is_head();
        let block = &mut self.block;
        each_field(request, |name, value| plain(block, name, value))?;
        self.body.extend_from_slice(request.body);
        Ok(())
    }
}

/// Calls `field` with each field of the request's header block in order,
/// pseudo-headers first; values without the spaces around them. Checks
/// what an HTTP/1.1 parser would (a token method and field names, a path
/// and values without control characters) and drops connection-specific
/// fields; a request that fails a check cannot be sent over HTTP/2 (nor
/// HTTP/3, whose rules for fields are the same).
pub(crate) fn each_field(request: &Request, mut field: impl FnMut(&[u8], &[u8])) -> Result<(), RequestError> {
    let method = request.method.as_bytes();
    let path = request.path_or_root();
    if method.is_empty() || !method.iter().all(|b| is_token(*b)) || !path.iter().all(|b| is_uri(*b)) {
        return Err(cannot_send());
    }
    // `:authority` is the user's `Host` when they set one, as on HTTP/1.1.
    let mut authority = Some(request.authority.as_bytes());
    if request.overrides.host {
        authority = request
            .fields
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(b"host"))
            .map(|(_, value)| trim(value));
    }
    field(b":method", method);
    field(b":scheme", if request.https { b"https" } else { b"http" });
    if let Some(authority) = authority {
        if !authority.iter().all(|b| is_value(*b)) {
            return Err(cannot_send());
        }
        field(b":authority", authority);
    }
    field(b":path", path);
    let mut valid = true;
    request.for_each_field(|name, value| {
        let value = trim(value);
        valid &= !name.is_empty() && name.iter().all(|b| is_token(*b)) && value.iter().all(|b| is_value(*b));
        let connection_specific = CONNECTION_SPECIFIC
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n.as_bytes()));
        let te_not_trailers = name.eq_ignore_ascii_case(b"te") && !value.eq_ignore_ascii_case(b"trailers");
        if valid && !connection_specific && !te_not_trailers {
            field(name, value);
        }
    });
    if valid { Ok(()) } else { Err(cannot_send()) }
}

fn cannot_send() -> RequestError {
    RequestError::new(
        ErrorKind::Protocol,
        ErrorDetail::Static("request cannot be sent over HTTP/2"),
    )
}

/// A token character (RFC 9110 section 5.6.2): methods and field names.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A character of a request target: visible, no space.
fn is_uri(b: u8) -> bool {
    b > b' ' && b != 0x7f
}

/// A character of a field value: visible, space or tab.
fn is_value(b: u8) -> bool {
    b == b'\t' || (b >= b' ' && b != 0x7f)
}

/// `value` without leading and trailing spaces and tabs.
fn trim(value: &[u8]) -> &[u8] {
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let start = value.iter().position(|b| !blank(b)).unwrap_or(value.len());
    let end = value.iter().rposition(|b| !blank(b)).map_or(start, |i| i + 1);
    &value[start..end]
}

/// Appends one field to a block that depends on no table state: a static
/// entry for the common methods and the scheme, a literal with a static
/// name for the other pseudo-headers, else a literal with its name (lower
/// case), none of them indexed.
fn plain(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    match (name, value) {
        (b":method", b"GET") => indexed(out, METHOD_GET),
        (b":method", b"POST") => indexed(out, METHOD_POST),
        (b":scheme", b"http") => indexed(out, SCHEME_HTTP),
        (b":scheme", b"https") => indexed(out, SCHEME_HTTPS),
        _ => match static_name(name) {
            Some(index) => literal_indexed_name(out, index, value),
            None => {
                out.push(0); // literal without indexing, new name
                string(out, name, true);
                string(out, value, false);
            }
        },
    }
}

/// The [`Indexed`] forms of a block of these fields (names in lower case),
/// or `None` when they do not fit the default table together.
fn index(fields: &[(Vec<u8>, Vec<u8>)]) -> Option<Indexed> {
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
    for (name, value) in fields {
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

/// An HPACK integer with an `prefix`-bit prefix after the `first` flag bits
/// (QPACK's integers are the same).
pub(crate) fn integer(out: &mut Vec<u8>, first: u8, prefix: u32, value: usize) {
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

    /// `method url` with these header fields and body, encoded for HTTP/2.
    fn encoded(
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<H2Request, RequestError> {
        use crate::request::{Fields, Overrides};
        let target = crate::target::Target::parse(url).unwrap();
        let pairs: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let fields = Fields::of(&pairs);
        let rules = Overrides::of(headers.iter().map(|(n, _)| *n));
        let path = target.path_and_query.as_bytes();
        H2Request::new(&Request::to(&target, method, path, &fields, rules, body))
    }

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
        let long = "a".repeat(150);
        let headers = [("Connection", "close"), ("X-Long", long.as_str())];
        let request = encoded("POST", "https://example.test:8443/api/x?y=1", &headers, b"hi").unwrap();
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
        // With volley's own User-Agent.
        let request = encoded("GET", "https://127.0.0.1:8443/", &[("X-A", "1")], b"").unwrap();
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
        let big = "b".repeat(5000);
        let request = encoded("GET", "https://a/", &[("X-Big", big.as_str())], b"").unwrap();
        assert!(request.indexed.is_none());
    }

    #[test]
    fn other_methods_are_literals() {
        let request = encoded("HEAD", "http://a/", &[], b"").unwrap();
        let fields = decode(&request.block);
        assert_eq!(fields[0], (":method".into(), "HEAD".into()));
        assert_eq!(fields[1], (":scheme".into(), "http".into()));
        assert!(request.is_head);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(encoded("GET", "http://a/", &[("X-Bad", "a\u{1}b")], b"").is_err());
        assert!(encoded("GET", "http://a/", &[("X Bad", "1")], b"").is_err());
        assert!(encoded("GE T", "http://a/", &[], b"").is_err());
    }

    /// What translating the HTTP/1.1 bytes did, kept by the direct
    /// encoder: the user's Host is the authority, connection-specific
    /// fields go, `te: trailers` stays, values lose their outer spaces.
    #[test]
    fn fields_follow_the_http1_rules() {
        let headers = [
            ("Host", " other.test:1 "),
            ("Keep-Alive", "5"),
            ("Upgrade", "h2c"),
            ("Proxy-Connection", "x"),
            ("Transfer-Encoding", "chunked"),
            ("TE", "trailers"),
            ("X-Pad", "\t v \t"),
        ];
        let fields = decode(
            &encoded("GET", "http://u:p@example.test/", &headers, b"")
                .unwrap()
                .block,
        );
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                ":method",
                ":scheme",
                ":authority",
                ":path",
                "user-agent",
                "authorization",
                "te",
                "x-pad"
            ]
        );
        assert_eq!(fields[2].1, "other.test:1");
        assert_eq!(fields[5].1, "Basic dTpw");
        assert_eq!(fields[7].1, "v");
        let gzip = decode(&encoded("GET", "http://a/", &[("te", "gzip")], b"").unwrap().block);
        assert!(gzip.iter().all(|(n, _)| n != "te"), "{gzip:?}");
    }

    /// A plan's request is encoded into the same buffers for every send:
    /// the same block as a fresh encoding, without the indexed forms.
    #[test]
    fn encoding_again_reuses_the_buffers() {
        let mut scratch = encoded("POST", "http://a/x", &[("X-A", "1")], b"body").unwrap();
        assert!(scratch.indexed.is_some());
        let (block, body) = (scratch.block.as_ptr(), scratch.body.as_ptr());
        let fields = crate::request::Fields::default();
        let target = crate::target::Target::parse("http://a/y").unwrap();
        let next = Request::to(&target, "HEAD", b"/y", &fields, Default::default(), b"");
        scratch.encode(&next).unwrap();
        assert_eq!(scratch.block, H2Request::new(&next).unwrap().block);
        assert!(scratch.body.is_empty() && scratch.is_head && scratch.indexed.is_none());
        assert_eq!((scratch.block.as_ptr(), scratch.body.as_ptr()), (block, body));
    }
}
