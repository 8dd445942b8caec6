//! A script's request text: one or more HTTP/1.1 requests back to back, as
//! wrk's `request()` returns them (several in one string are a pipelined
//! round). Read once per round, into spans of the text, so that the same
//! text can go out as it is over HTTP/1.1 and be re-encoded, request by
//! request, for HTTP/2 and HTTP/3.

use crate::request::{Fields, Overrides, Request};
use crate::target::Target;
use std::ops::Range;

/// The most header fields one request of a script may have.
const MAX_FIELDS: usize = 64;

/// One request of the text, as spans of it.
#[derive(Clone, Debug, Default)]
pub struct Span {
    pub method: Range<usize>,
    pub path: Range<usize>,
    /// Each field's name and value.
    pub fields: Vec<(Range<usize>, Range<usize>)>,
    pub body: Range<usize>,
    /// The whole request, head and body.
    pub whole: Range<usize>,
}

/// Why a script's text is not a request: what was wrong and where, as a
/// line and column of the text (both from 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at {line}:{column}")]
pub struct NotARequest {
    pub what: String,
    pub line: usize,
    pub column: usize,
}

/// The requests of a text, read into reused spans.
#[derive(Debug, Default)]
pub struct RequestText {
    pub bytes: Vec<u8>,
    pub spans: Vec<Span>,
    /// How many of `spans` hold this text's requests.
    pub count: usize,
}

impl RequestText {
    /// Reads `text` in place of what was here, keeping the allocations.
    pub fn read(&mut self, text: &[u8]) -> Result<(), NotARequest> {
        self.bytes.clear();
        self.bytes.extend_from_slice(text);
        self.count = 0;
        let mut at = 0;
        while at < self.bytes.len() {
            if self.count == self.spans.len() {
                self.spans.push(Span::default());
            }
            let span = &mut self.spans[self.count];
            at = read_one(&self.bytes, at, span)?;
            self.count += 1;
        }
        if self.count == 0 {
            return Err(not_a_request(&self.bytes, 0, "incomplete request"));
        }
        Ok(())
    }

    /// The text's requests.
    pub fn requests(&self) -> &[Span] {
        &self.spans[..self.count]
    }

    /// Request `index` as volley sends it to `target`: exactly the text's
    /// fields (none of volley's own added) and body. `fields` is the buffer
    /// its header fields are copied into.
    pub fn request<'a>(&'a self, index: usize, target: &'a Target, fields: &'a mut Fields) -> Request<'a> {
        let span = &self.spans[index];
        let text = &self.bytes;
        fields.clear();
        let mut host = false;
        let mut connection = false;
        for (name, value) in &span.fields {
            let name = std::str::from_utf8(&text[name.clone()]).unwrap_or_default();
            host |= name.eq_ignore_ascii_case("host");
            connection |= name.eq_ignore_ascii_case("connection");
            fields.push(name, &text[value.clone()]);
        }
        let overrides = Overrides {
            host,
            user_agent: true,
            framing: true,
            connection,
            authorization: true,
        };
        let method = std::str::from_utf8(&text[span.method.clone()]).unwrap_or("GET");
        Request::to(
            target,
            method,
            &text[span.path.clone()],
            fields,
            overrides,
            &text[span.body.clone()],
        )
    }

    /// Whether request `index` is a HEAD (its response has no body).
    pub fn is_head(&self, index: usize) -> bool {
        self.bytes[self.spans[index].method.clone()].eq_ignore_ascii_case(b"HEAD")
    }
}

/// Reads the request that starts at `at` into `span`; returns where the
/// next one starts.
fn read_one(text: &[u8], at: usize, span: &mut Span) -> Result<usize, NotARequest> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut parsed = httparse::Request::new(&mut headers);
    let head_len = match parsed.parse(&text[at..]) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Err(not_a_request(text, text.len(), "incomplete request")),
        Err(err) => return Err(not_a_request(text, at, &err.to_string())),
    };
    let base = text.as_ptr() as usize;
    let offset = |s: &[u8]| s.as_ptr() as usize - base;
    let range = |s: &[u8]| offset(s)..offset(s) + s.len();
    let method = parsed.method.unwrap_or("GET").as_bytes();
    let path = parsed.path.unwrap_or("/").as_bytes();
    span.method = range(method);
    span.path = range(path);
    span.fields.clear();
    let mut length = 0usize;
    for header in parsed.headers.iter() {
        span.fields
            .push((range(header.name.as_bytes()), range(header.value)));
        if header.name.eq_ignore_ascii_case("content-length") {
            length = std::str::from_utf8(header.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| not_a_request(text, offset(header.value), "invalid content length"))?;
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(not_a_request(
                text,
                offset(header.value),
                "a chunked request body (give the body a Content-Length)",
            ));
        }
    }
    let body_start = at + head_len;
    let end = body_start + length;
    if end > text.len() {
        return Err(not_a_request(text, text.len(), "incomplete request"));
    }
    span.body = body_start..end;
    span.whole = at..end;
    Ok(end)
}

/// `what`, placed at byte `at` of `text` as a line and column.
fn not_a_request(text: &[u8], at: usize, what: &str) -> NotARequest {
    let before = &text[..at.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    NotARequest {
        what: what.to_string(),
        line,
        column,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipelined_text_is_read_as_its_requests() {
        let mut text = RequestText::default();
        let one = "GET /?foo HTTP/1.1\r\nHost: a\r\n\r\n";
        let two = "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
        text.read(format!("{one}{two}{one}").as_bytes()).unwrap();
        let spans = text.requests();
        assert_eq!(spans.len(), 3);
        assert_eq!(&text.bytes[spans[1].method.clone()], b"POST");
        assert_eq!(&text.bytes[spans[1].body.clone()], b"abc");
        assert_eq!(&text.bytes[spans[2].path.clone()], b"/?foo");
        assert_eq!(spans[2].whole.end, text.bytes.len());
        // Read again, shorter: only the new text's requests count.
        text.read(one.as_bytes()).unwrap();
        assert_eq!(text.requests().len(), 1);
    }

    #[test]
    fn a_request_keeps_exactly_the_texts_fields() {
        let mut text = RequestText::default();
        text.read(b"PUT /x HTTP/1.1\r\nHost: h:1\r\nX-Counter: 7\r\nContent-Length: 2\r\n\r\nhi")
            .unwrap();
        let target = Target::parse("http://127.0.0.1:9/").unwrap();
        let mut fields = Fields::default();
        let request = text.request(0, &target, &mut fields);
        let mut sent = Vec::new();
        request.for_each_field(|name, value| {
            sent.push(format!(
                "{}: {}",
                String::from_utf8_lossy(name),
                String::from_utf8_lossy(value)
            ))
        });
        assert_eq!(sent, ["Host: h:1", "X-Counter: 7", "Content-Length: 2"]);
        assert_eq!(request.method, "PUT");
        assert_eq!(request.body, b"hi");
        assert!(request.overrides.host);
    }

    #[test]
    fn what_is_not_a_request_is_placed_by_line_and_column() {
        let mut text = RequestText::default();
        let err = text.read(b"GET / HTTP/1.1\r\nHost: a\r\n").unwrap_err();
        assert_eq!(err.what, "incomplete request");
        assert_eq!((err.line, err.column), (3, 1));
        let err = text.read(b"hello").unwrap_err();
        assert_eq!(err.to_string(), "incomplete request at 1:6");
        let err = text.read(b"").unwrap_err();
        assert_eq!(err.what, "incomplete request");
        let err = text
            .read(b"GET / HTTP/1.1\r\nContent-Length: 9\r\n\r\nab")
            .unwrap_err();
        assert_eq!(err.what, "incomplete request");
        assert!(text.read(b"G\x01T / HTTP/1.1\r\n\r\n").is_err());
    }
}
