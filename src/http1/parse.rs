//! A response head read: by volley's own scanner where it is the usual
//! head (`head`), by httparse otherwise, into what the reader needs of it
//! (its length, status, how its body ends, whether the connection closes,
//! an `Alt-Svc` offer of HTTP/3), with the last head a worker read kept
//! to answer the next same one with a comparison ([`KnownHead`]).

use super::head;
use crate::response::Capture;
use crate::sample::RequestError;
use std::cell::RefCell;

/// A response head with more fields than this is a protocol error.
const MAX_HEADERS: usize = 256;

/// How the end of a body is found (RFC 9112 section 6.3).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// Parses a complete head, or returns `None` when more bytes are needed:
/// the usual head by volley's own scanner, any other by httparse.
pub(super) fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<ParsedHead>, RequestError> {
    if buf.is_empty() {
        // Saves httparse's setup (and clearing its field slots) when
        // nothing has come yet.
        return Ok(None);
    }
    match scan_head(buf, head_request) {
        Some(scanned) => scanned.map(Some),
        None => parse_head_generally(buf, head_request),
    }
}

/// [`parse_head`] by volley's scanner alone: `None` where it declines.
fn scan_head(buf: &[u8], head_request: bool) -> Option<Result<ParsedHead, RequestError>> {
    let mut fields = Fields::default();
    let line = head::scan(buf, |name, value| fields.add(name, value))?;
    Some(fields.conclude(line, head_request))
}

/// The longest head a [`KnownHead`] keeps.
const KNOWN_MAX: usize = 1024;

/// The last head the scanner read (its bytes, for a HEAD request or not)
/// and what it said. A server answers the same request with the same head
/// again and again (nginx's changes once a second, with its `Date`), on
/// every connection, so a worker keeps one: a response that begins with
/// those bytes has that head, since a head ends at its first blank line
/// and the scanner reads nothing past it, and reading it is one comparison.
#[derive(Default)]
pub struct KnownHead {
    pub(super) last: RefCell<Option<(Vec<u8>, bool, ParsedHead)>>,
}

impl KnownHead {
    /// [`parse_head`], answered from the last head when `buf` begins with it.
    pub(super) fn parse(&self, buf: &[u8], head_request: bool) -> Result<Option<ParsedHead>, RequestError> {
        if buf.is_empty() {
            // Nothing has come yet: the usual case when a response is first
            // polled right after its request went out.
            return Ok(None);
        }
        let mut last = self.last.borrow_mut();
        if let Some((bytes, was_head, parsed)) = &*last
            && *was_head == head_request
            && buf.starts_with(bytes)
        {
            return Ok(Some(*parsed));
        }
        match scan_head(buf, head_request) {
            Some(Ok(parsed)) => {
                if parsed.len <= KNOWN_MAX {
                    let (bytes, was_head, known) = last.get_or_insert_with(|| (Vec::new(), false, parsed));
                    bytes.clear();
                    bytes.extend_from_slice(&buf[..parsed.len]);
                    (*was_head, *known) = (head_request, parsed);
                }
                Ok(Some(parsed))
            }
            Some(Err(err)) => Err(err),
            None => parse_head_generally(buf, head_request),
        }
    }
}

/// [`parse_head`] by httparse alone.
fn parse_head_generally(buf: &[u8], head_request: bool) -> Result<Option<ParsedHead>, RequestError> {
    let mut slots = [httparse::EMPTY_HEADER; head::MOST_FIELDS];
    match parse_with(buf, &mut slots, head_request) {
        Err(httparse::Error::TooManyHeaders) => {
            let mut slots = vec![httparse::EMPTY_HEADER; MAX_HEADERS];
            parse_with(buf, &mut slots, head_request).map_err(|e| match e {
                httparse::Error::TooManyHeaders => RequestError::protocol("response has over 256 headers"),
                _ => RequestError::protocol("invalid HTTP/1.x response"),
            })?
        }
        Err(_) => Err(RequestError::protocol("invalid HTTP/1.x response")),
        Ok(parsed) => parsed,
    }
}

/// Whether volley's scanner and httparse read `buf` the same way, for the
/// tests and the fuzz target: where the scanner takes a head, httparse
/// must take it too and conclude the same.
pub fn scanner_agrees_with_httparse(buf: &[u8], head_request: bool) -> bool {
    let mut fields = Fields::default();
    let mut seen = Vec::new();
    let Some(line) = head::scan(buf, |name, value| {
        fields.add(name, value);
        seen.push((name.to_vec(), value.to_vec()));
    }) else {
        return true;
    };
    let mut slots = [httparse::EMPTY_HEADER; head::MOST_FIELDS];
    let mut response = httparse::Response::new(&mut slots);
    if response.parse(buf) != Ok(httparse::Status::Complete(line.len)) {
        return false;
    }
    let same_fields = response.headers.len() == seen.len()
        && (response.headers.iter().zip(&seen))
            .all(|(h, (name, value))| h.name.as_bytes() == name && h.value == value);
    let same_line = response.code == Some(line.status) && response.version == Some(u8::from(!line.http10));
    if !(same_fields && same_line) {
        return false;
    }
    let scanned = fields.conclude(line, head_request);
    let general = parse_head_generally(buf, head_request);
    match (scanned, general) {
        (Ok(a), Ok(Some(b))) => a == b,
        (Err(a), Err(b)) => a.kind == b.kind && a.message() == b.message(),
        _ => false,
    }
}

/// What a response head says: its length, status, how its body ends,
/// whether the connection closes after it, and any HTTP/3 its `Alt-Svc`
/// offers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct ParsedHead {
    pub(super) len: usize,
    pub(super) status: u16,
    pub(super) framing: Framing,
    pub(super) close: bool,
    pub(super) h3_offer: Option<u16>,
}

/// Parses with the given header slots; header-level problems come back as
/// `RequestError`s inside `Ok` so only httparse's own errors trigger a retry.
fn parse_with<'b>(
    buf: &'b [u8],
    slots: &mut [httparse::Header<'b>],
    head_request: bool,
) -> Result<Result<Option<ParsedHead>, RequestError>, httparse::Error> {
    let mut response = httparse::Response::new(slots);
    let head_len = match response.parse(buf)? {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => return Ok(Ok(None)),
    };
    let mut fields = Fields::default();
    for header in response.headers.iter() {
        fields.add(header.name.as_bytes(), header.value);
    }
    let line = head::StatusLine {
        len: head_len,
        http10: response.version == Some(0),
        status: response.code.unwrap_or(0),
    };
    Ok(fields.conclude(line, head_request).map(Some))
}

/// What a head's fields say about framing and the connection, gathered
/// field by field (from either parser); the first bad field is the error.
#[derive(Default)]
struct Fields {
    length: Option<u64>,
    chunked: bool,
    /// The last `close` or `keep-alive` in a `Connection` field: `true`
    /// for close.
    close: Option<bool>,
    h3_offer: Option<u16>,
    error: Option<RequestError>,
}

impl Fields {
    fn add(&mut self, name: &[u8], value: &[u8]) {
        if self.error.is_some() {
            return;
        }
        // By length first: most fields are none of these four.
        match name.len() {
            14 if head::is_name(name, b"content-length") => {
                if let Err(err) = self.add_length(value) {
                    self.error = Some(err);
                }
            }
            17 if head::is_name(name, b"transfer-encoding") => {
                self.chunked = value
                    .rsplit(|b| *b == b',')
                    .next()
                    .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            }
            10 if head::is_name(name, b"connection") => {
                for token in value.split(|b| *b == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        self.close = Some(true);
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        self.close = Some(false);
                    }
                }
            }
            7 if head::is_name(name, b"alt-svc") => {
                self.h3_offer = self.h3_offer.or_else(|| crate::response::h3_offer(value));
            }
            _ => {}
        }
    }

    fn add_length(&mut self, value: &[u8]) -> Result<(), RequestError> {
        // Digits only (RFC 9112 section 6.3), read here rather than by
        // Rust's parser, which would also take a sign (`+2`), and once per
        // response.
        let digits = value.trim_ascii();
        let value = (!digits.is_empty())
            .then_some(digits)
            .and_then(|digits| {
                digits.iter().try_fold(0u64, |n, &d| {
                    let digit = d.checked_sub(b'0').filter(|d| *d < 10)?;
                    n.checked_mul(10)?.checked_add(u64::from(digit))
                })
            })
            .ok_or_else(|| RequestError::protocol("invalid Content-Length"))?;
        if self.length.is_some_and(|l| l != value) {
            return Err(RequestError::protocol("conflicting Content-Length headers"));
        }
        self.length = Some(value);
        Ok(())
    }

    /// The head's meaning, given its first line.
    fn conclude(self, line: head::StatusLine, head_request: bool) -> Result<ParsedHead, RequestError> {
        if let Some(err) = self.error {
            return Err(err);
        }
        let status = line.status;
        let framing = if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
            Framing::Empty
        } else if self.chunked {
            Framing::Chunked
        } else if let Some(n) = self.length {
            Framing::Length(n)
        } else {
            Framing::UntilClose
        };
        Ok(ParsedHead {
            len: line.len,
            status,
            framing,
            close: self.close.unwrap_or(line.http10),
            h3_offer: self.h3_offer,
        })
    }
}

/// Keeps what `capture` wants of a response head's fields.
pub(super) fn capture_head(capture: &mut Capture, head: &[u8]) {
    let mut slots = [httparse::EMPTY_HEADER; head::MOST_FIELDS];
    let mut many;
    let mut response = httparse::Response::new(&mut slots);
    if let Err(httparse::Error::TooManyHeaders) = response.parse(head) {
        many = vec![httparse::EMPTY_HEADER; MAX_HEADERS];
        response = httparse::Response::new(&mut many);
        if response.parse(head).is_err() {
            return;
        }
    }
    for h in response.headers.iter() {
        capture.add_header(h.name, h.value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Content-Length is digits alone, blanks around them aside, and fits in
    /// 64 bits.
    #[test]
    fn content_length_is_digits_alone() {
        let length = |value: &[u8]| {
            let mut fields = Fields::default();
            fields.add_length(value).ok().and(fields.length)
        };
        assert_eq!(length(b"5"), Some(5));
        assert_eq!(length(b" \t0042\t "), Some(42));
        assert_eq!(length(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b""[..],
            b" ",
            b"18446744073709551616",
            b"99999999999999999999",
            b"+2",
            b"-1",
            b"5 5",
            b"0x5",
            b"5\xc2\xa0",
            b"/",
            b":",
        ] {
            assert_eq!(length(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
