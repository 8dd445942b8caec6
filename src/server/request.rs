//! Incremental HTTP/1.1 request parsing for the embedded target server.
//!
//! It lives apart from the socket code so that framing (heads, `Content-Length`
//! and chunked bodies, pipelined requests sharing one buffer) can be unit
//! tested on plain byte slices. The parser never owns the connection's read
//! buffer: it is handed the unconsumed bytes each time and answers with ranges
//! into them, so a request on the hot path costs no allocation. Only a chunked
//! body is copied out, because its bytes are not contiguous on the wire.
//!
//! [`Head`] keeps only what every request needs; the few endpoints that want
//! other header fields (cookies, credentials) parse the head again with
//! [`Fields`], so ordinary requests pay nothing for them.

use std::ops::Range;

use httparse::Status;

/// Longest request head accepted; a client still sending its head past this
/// is either broken or hostile.
pub(super) const MAX_HEAD: usize = 64 * 1024;
/// Headers per request; `httparse` needs a fixed array, kept on the stack.
const MAX_HEADERS: usize = 64;
/// Largest request body accepted (`413` above).
pub(super) const MAX_BODY: usize = 64 * 1024 * 1024;
/// Chunk-size lines and trailers around a chunked body may add this much to
/// the raw request; a body cut into absurdly small chunks can exceed it and
/// gets a `413`, which bounds what one connection can make us buffer.
const CHUNK_OVERHEAD: usize = 1024 * 1024;
/// Trailer section after the last chunk.
const MAX_TRAILERS: usize = 16 * 1024;

/// Why a request could not be read. Each maps to the status the server
/// answers with before closing the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum ParseError {
    #[error("malformed request")]
    Malformed,
    #[error("request head too large")]
    HeadTooLarge,
    #[error("request body too large")]
    BodyTooLarge,
    #[error("unsupported transfer encoding")]
    UnsupportedEncoding,
}

impl ParseError {
    pub(super) fn status(self) -> u16 {
        match self {
            ParseError::Malformed => 400,
            ParseError::HeadTooLarge => 431,
            ParseError::BodyTooLarge => 413,
            ParseError::UnsupportedEncoding => 501,
        }
    }
}

/// The methods the endpoints tell apart; most endpoints answer any method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Method {
    Get,
    /// Gets the headers a `GET` would, and no body.
    Head,
    Post,
    Other,
}

impl Method {
    pub(super) fn of(name: &str) -> Self {
        match name {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            _ => Method::Other,
        }
    }
}

/// What the server needs from a request head. Ranges are relative to the
/// start of the request in the buffer given to [`RequestParser::parse`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Head {
    pub method: Method,
    /// The path of the request target, without query string: what routing
    /// looks at.
    pub path: Range<usize>,
    /// The query string, without its `?`; empty when there is none.
    pub query: Range<usize>,
    pub content_type: Option<Range<usize>>,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// HTTP/1.0 needs an explicit `Connection: keep-alive` in the response.
    pub http10: bool,
    pub expect_continue: bool,
}

/// Where a complete request's body is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Body {
    Empty,
    /// A `Content-Length` body, in place in the buffer.
    InBuffer(Range<usize>),
    /// A chunked body, decoded into [`RequestParser::decoded_body`].
    Decoded,
}

/// A complete request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Request {
    pub head: Head,
    pub body: Body,
    /// Bytes the request took in the buffer; the next pipelined request
    /// starts right after.
    pub len: usize,
}

#[derive(Debug)]
enum Framing {
    Length(usize),
    /// `next` is where the next chunk-size line starts, relative to the
    /// request start; chunks before it are already decoded.
    Chunked {
        next: usize,
    },
}

/// A request whose head is parsed but whose body has not fully arrived; kept
/// so that neither the head nor the chunks decoded so far are parsed again.
#[derive(Debug)]
struct Pending {
    head: Head,
    head_len: usize,
    framing: Framing,
    continue_due: bool,
}

/// Per-connection parser state, reused across the connection's requests.
#[derive(Debug, Default)]
pub(super) struct RequestParser {
    pending: Option<Pending>,
    decoded: Vec<u8>,
}

impl RequestParser {
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// Parses the request starting at `buf[0]`. `Ok(None)` means more bytes
    /// are needed: call again with the same request start and more data
    /// appended. After an error the connection must be closed.
    pub(super) fn parse(&mut self, buf: &[u8]) -> Result<Option<Request>, ParseError> {
        let result = self.parse_inner(buf);
        if !matches!(result, Ok(None)) {
            self.pending = None;
        }
        result
    }

    fn parse_inner(&mut self, buf: &[u8]) -> Result<Option<Request>, ParseError> {
        if self.pending.is_none() {
            let Some((head, head_len, framing)) = parse_head(buf)? else {
                return Ok(None);
            };
            if let Framing::Length(0) = framing {
                return Ok(Some(Request {
                    head,
                    body: Body::Empty,
                    len: head_len,
                }));
            }
            // A huge body from an earlier request should not stay resident
            // for the rest of the connection's life.
            if self.decoded.capacity() > CHUNK_OVERHEAD {
                self.decoded = Vec::new();
            }
            self.decoded.clear();
            self.pending = Some(Pending {
                continue_due: head.expect_continue,
                head,
                head_len,
                framing,
            });
        }
        let Some(pending) = self.pending.as_mut() else {
            return Ok(None);
        };
        let (body, len) = match &mut pending.framing {
            Framing::Length(n) => {
                let end = pending.head_len + *n;
                if buf.len() < end {
                    return Ok(None);
                }
                (Body::InBuffer(pending.head_len..end), end)
            }
            Framing::Chunked { next } => {
                match decode_chunks(buf, next, &mut self.decoded, pending.head_len)? {
                    Some(end) => (Body::Decoded, end),
                    None => return Ok(None),
                }
            }
        };
        Ok(Some(Request {
            head: pending.head.clone(),
            body,
            len,
        }))
    }

    /// True once after a head with `Expect: 100-continue` whose body has not
    /// arrived yet: the client waits for a `100 Continue` before sending it.
    pub(super) fn take_continue(&mut self) -> bool {
        self.pending
            .as_mut()
            .is_some_and(|p| std::mem::take(&mut p.continue_due))
    }

    /// The body of `req`, which must come from the latest `parse` on `buf`.
    pub(super) fn body<'a>(&'a self, buf: &'a [u8], req: &Request) -> &'a [u8] {
        match &req.body {
            Body::Empty => &[],
            Body::InBuffer(range) => buf.get(range.clone()).unwrap_or(&[]),
            Body::Decoded => &self.decoded,
        }
    }
}

fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize, Framing)>, ParseError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(Status::Complete(n)) => n,
        Ok(Status::Partial) if buf.len() > MAX_HEAD => return Err(ParseError::HeadTooLarge),
        Ok(Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(ParseError::HeadTooLarge),
        Err(_) => return Err(ParseError::Malformed),
    };
    if head_len > MAX_HEAD {
        return Err(ParseError::HeadTooLarge);
    }
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(ParseError::Malformed);
    };
    let target_start = offset_in(buf, target.as_bytes())?;
    let (path, query) = split_target(target.as_bytes(), target_start);

    let mut content_length: Option<u64> = None;
    let mut transfer_encoding = false;
    let mut chunked = false;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut expect_continue = false;
    let mut content_type = None;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_decimal(h.value.trim_ascii()).ok_or(ParseError::Malformed)?;
            // Two different lengths mean two framings; picking one is how
            // request smuggling starts.
            if content_length.is_some_and(|c| c != n) {
                return Err(ParseError::Malformed);
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_encoding = true;
            for coding in tokens(h.value) {
                if !coding.eq_ignore_ascii_case(b"chunked") {
                    return Err(ParseError::UnsupportedEncoding);
                }
                if chunked {
                    return Err(ParseError::Malformed);
                }
                chunked = true;
            }
        } else if name.eq_ignore_ascii_case(b"connection") {
            for option in tokens(h.value) {
                close |= option.eq_ignore_ascii_case(b"close");
                keep_alive_token |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case(b"content-type") {
            let value = h.value.trim_ascii();
            if !value.is_empty() {
                let start = offset_in(buf, value)?;
                content_type = Some(start..start + value.len());
            }
        } else if name.eq_ignore_ascii_case(b"expect") {
            expect_continue = version == 1 && h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
    }
    if transfer_encoding && (!chunked || content_length.is_some()) {
        return Err(ParseError::Malformed);
    }
    let framing = if chunked {
        Framing::Chunked { next: head_len }
    } else {
        let n = content_length.unwrap_or(0);
        match usize::try_from(n) {
            Ok(n) if n <= MAX_BODY => Framing::Length(n),
            _ => return Err(ParseError::BodyTooLarge),
        }
    };
    let http10 = version == 0;
    let head = Head {
        method: Method::of(method),
        path,
        query,
        content_type,
        keep_alive: !close && (!http10 || keep_alive_token),
        http10,
        expect_continue,
    };
    Ok(Some((head, head_len, framing)))
}

/// Decodes chunks from `*next` on, appending their data to `out`. Returns the
/// request's total length once the last chunk and trailers are in.
fn decode_chunks(
    buf: &[u8],
    next: &mut usize,
    out: &mut Vec<u8>,
    head_len: usize,
) -> Result<Option<usize>, ParseError> {
    loop {
        let rest = buf.get(*next..).unwrap_or_default();
        let (line_len, size) = match httparse::parse_chunk_size(rest) {
            Ok(Status::Complete(parsed)) => parsed,
            Ok(Status::Partial) => return wait_for_chunks(buf, head_len),
            Err(_) => return Err(ParseError::Malformed),
        };
        let data = rest.get(line_len..).unwrap_or_default();
        if size == 0 {
            return match end_of_trailers(data)? {
                Some(end) => Ok(Some(*next + line_len + end)),
                None => wait_for_chunks(buf, head_len),
            };
        }
        let size = match usize::try_from(size) {
            Ok(size) if size <= MAX_BODY - out.len() => size,
            _ => return Err(ParseError::BodyTooLarge),
        };
        let Some(chunk) = data.get(..size + 2) else {
            return wait_for_chunks(buf, head_len);
        };
        let (chunk, crlf) = chunk.split_at(size);
        if crlf != b"\r\n" {
            return Err(ParseError::Malformed);
        }
        out.extend_from_slice(chunk);
        *next += line_len + size + 2;
    }
}

fn wait_for_chunks(buf: &[u8], head_len: usize) -> Result<Option<usize>, ParseError> {
    if buf.len() > head_len + MAX_BODY + CHUNK_OVERHEAD {
        Err(ParseError::BodyTooLarge)
    } else {
        Ok(None)
    }
}

/// Trailer fields are ignored; only their end (an empty line) matters.
fn end_of_trailers(data: &[u8]) -> Result<Option<usize>, ParseError> {
    let mut line_start = 0;
    while let Some(nl) = data[line_start..].iter().position(|&b| b == b'\n') {
        let line_end = line_start + nl + 1;
        if matches!(&data[line_start..line_end], b"\r\n" | b"\n") {
            return Ok(Some(line_end));
        }
        line_start = line_end;
        if line_start > MAX_TRAILERS {
            return Err(ParseError::HeadTooLarge);
        }
    }
    if data.len() > MAX_TRAILERS {
        return Err(ParseError::HeadTooLarge);
    }
    Ok(None)
}

/// Where `part` (a slice `httparse` took out of `buf`) starts in `buf`.
/// Checked rather than assumed, so a surprise can only mean a 400.
fn offset_in(buf: &[u8], part: &[u8]) -> Result<usize, ParseError> {
    let start = part
        .as_ptr()
        .addr()
        .checked_sub(buf.as_ptr().addr())
        .ok_or(ParseError::Malformed)?;
    if start + part.len() <= buf.len() {
        Ok(start)
    } else {
        Err(ParseError::Malformed)
    }
}

/// The path and query parts of a request target: the query is not part of
/// routing, and an absolute-form target (`http://host/path`, as proxies send)
/// is reduced to its path. A fragment (which clients should not send) belongs
/// to neither.
fn split_target(target: &[u8], offset: usize) -> (Range<usize>, Range<usize>) {
    let mut start = 0;
    if !target.starts_with(b"/")
        && let Some(scheme_end) = target.windows(3).position(|w| w == b"://")
    {
        // The authority ends where the path, the query or a fragment starts.
        let authority = scheme_end + 3;
        start = target[authority..]
            .iter()
            .position(|&b| matches!(b, b'/' | b'?' | b'#'))
            .map_or(target.len(), |p| authority + p);
    }
    let end = target[start..]
        .iter()
        .position(|&b| b == b'?' || b == b'#')
        .map_or(target.len(), |p| start + p);
    let query = if target.get(end) == Some(&b'?') {
        let from = end + 1;
        let to = target[from..]
            .iter()
            .position(|&b| b == b'#')
            .map_or(target.len(), |p| from + p);
        from..to
    } else {
        end..end
    };
    (
        offset + start..offset + end,
        offset + query.start..offset + query.end,
    )
}

/// The header fields of a request, for the endpoints that want more than
/// [`Head`] keeps: an HTTP/1.1 head already accepted by
/// [`RequestParser::parse`], parsed again (held on the stack, like the first
/// parse), or the header map HTTP/2 decoded.
// The parsed variant is large, but lives briefly on the stack of the few
// endpoints that read fields; boxing it would allocate for nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Fields<'a> {
    Parsed {
        all: [httparse::Header<'a>; MAX_HEADERS],
        len: usize,
    },
    Map(&'a http::HeaderMap),
}

impl<'a> Fields<'a> {
    /// `request` starts where the request does (its body may follow).
    pub(super) fn of(request: &'a [u8]) -> Self {
        let mut all = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut all);
        // The same bytes parsed before, so this succeeds; were it not to,
        // no fields at all is the answer that cannot be misread.
        let len = match req.parse(request) {
            Ok(Status::Complete(_)) => req.headers.len(),
            _ => 0,
        };
        Fields::Parsed { all, len }
    }

    /// Every field as sent (HTTP/2 sends names in lower case): name, then
    /// value.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> {
        // One of the two is empty; chaining them avoids boxing an iterator.
        let (parsed, map) = match self {
            Fields::Parsed { all, len } => (&all[..*len], None),
            Fields::Map(map) => (&[][..], Some(*map)),
        };
        parsed.iter().map(|h| (h.name, h.value)).chain(
            map.into_iter()
                .flat_map(|map| map.iter().map(|(name, value)| (name.as_str(), value.as_bytes()))),
        )
    }

    /// The values of the fields called `name` (in any case), in order.
    pub(super) fn values(&self, name: &str) -> impl Iterator<Item = &'a [u8]> {
        self.iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}

/// Digits only: `+5`, `-1`, `0x10` and overflowing values are all rejected.
pub(super) fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        if b.is_ascii_digit() {
            acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// The non-empty elements of a comma-separated header value.
fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(buf: &[u8]) -> Result<Option<Request>, ParseError> {
        RequestParser::new().parse(buf)
    }

    fn path<'a>(buf: &'a [u8], req: &Request) -> &'a [u8] {
        &buf[req.head.path.clone()]
    }

    #[test]
    fn simple_get() {
        let buf = b"GET /hi?x=1 HTTP/1.1\r\nHost: a\r\n\r\n";
        let req = parse_all(buf).unwrap().unwrap();
        assert_eq!(path(buf, &req), b"/hi");
        assert_eq!(req.len, buf.len());
        assert_eq!(&buf[req.head.query.clone()], b"x=1");
        assert_eq!(req.body, Body::Empty);
        assert!(req.head.keep_alive);
        assert_eq!(req.head.method, Method::Get);
        assert!(!req.head.http10);
    }

    #[test]
    fn content_length_body() {
        let buf = b"POST /echo HTTP/1.1\r\nContent-Length: 5\r\nContent-Type: text/x\r\n\r\nhello";
        let mut parser = RequestParser::new();
        let req = parser.parse(buf).unwrap().unwrap();
        assert_eq!(parser.body(buf, &req), b"hello");
        assert_eq!(&buf[req.head.content_type.clone().unwrap()], b"text/x");
        assert_eq!(req.len, buf.len());
    }

    #[test]
    fn chunked_body() {
        let buf = b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
                    5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: y\r\n\r\nGET /hi HTTP/1.1\r\n\r\n";
        let mut parser = RequestParser::new();
        let req = parser.parse(buf).unwrap().unwrap();
        assert_eq!(parser.body(buf, &req), b"hello, world");
        assert!(buf[req.len..].starts_with(b"GET /hi"));
    }

    #[test]
    fn chunked_body_arriving_byte_by_byte() {
        let buf = b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
                    3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let mut parser = RequestParser::new();
        for end in 0..buf.len() {
            assert_eq!(parser.parse(&buf[..end]), Ok(None), "prefix of {end} bytes");
        }
        let req = parser.parse(buf).unwrap().unwrap();
        assert_eq!(parser.body(buf, &req), b"abcde");
        assert_eq!(req.len, buf.len());
    }

    #[test]
    fn pipelined_requests_share_one_buffer() {
        let buf =
            b"GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nxyHEAD /c HTTP/1.1\r\n\r\n";
        let mut parser = RequestParser::new();
        let mut start = 0;
        let mut seen = Vec::new();
        while start < buf.len() {
            let rest = &buf[start..];
            let req = parser.parse(rest).unwrap().unwrap();
            seen.push((
                path(rest, &req).to_vec(),
                parser.body(rest, &req).to_vec(),
                req.head.method,
            ));
            start += req.len;
        }
        assert_eq!(
            seen,
            vec![
                (b"/a".to_vec(), vec![], Method::Get),
                (b"/b".to_vec(), b"xy".to_vec(), Method::Post),
                (b"/c".to_vec(), vec![], Method::Head),
            ]
        );
    }

    #[test]
    fn partial_input_needs_more() {
        let buf = b"POST /echo HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd";
        let mut parser = RequestParser::new();
        for end in 0..buf.len() {
            assert_eq!(parser.parse(&buf[..end]), Ok(None), "prefix of {end} bytes");
        }
        assert!(parser.parse(buf).unwrap().is_some());
    }

    #[test]
    fn expect_continue_is_reported_once_while_body_pending() {
        let head = b"PUT /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
        let mut parser = RequestParser::new();
        assert_eq!(parser.parse(head), Ok(None));
        assert!(parser.take_continue());
        assert!(!parser.take_continue());
        let mut full = head.to_vec();
        full.extend_from_slice(b"ok");
        assert!(parser.parse(&full).unwrap().is_some());
        assert!(!parser.take_continue());
    }

    #[test]
    fn connection_semantics() {
        let close = parse_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!close.head.keep_alive);
        let old = parse_all(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!old.head.keep_alive);
        assert!(old.head.http10);
        let old_ka = parse_all(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(old_ka.head.keep_alive);
    }

    #[test]
    fn absolute_form_target() {
        let buf = b"GET http://example.com:80/hi?q HTTP/1.1\r\n\r\n";
        let req = parse_all(buf).unwrap().unwrap();
        assert_eq!(path(buf, &req), b"/hi");
        assert_eq!(&buf[req.head.query.clone()], b"q");
    }

    #[test]
    fn path_and_query() {
        fn split(target: &[u8]) -> (&[u8], &[u8]) {
            let (path, query) = split_target(target, 0);
            (&target[path], &target[query])
        }
        assert_eq!(split(b"/a"), (&b"/a"[..], &b""[..]));
        assert_eq!(split(b"/a?"), (&b"/a"[..], &b""[..]));
        assert_eq!(split(b"/a?page=2&x"), (&b"/a"[..], &b"page=2&x"[..]));
        assert_eq!(split(b"/a?p=1#frag"), (&b"/a"[..], &b"p=1"[..]));
        assert_eq!(split(b"/a#frag?no"), (&b"/a"[..], &b""[..]));
        assert_eq!(split(b"/a?b?c"), (&b"/a"[..], &b"b?c"[..]));
        assert_eq!(split(b"http://h"), (&b""[..], &b""[..]));
        assert_eq!(split(b"http://h?q=1"), (&b""[..], &b"q=1"[..]));
        assert_eq!(split(b"http://h/p?q=1"), (&b"/p"[..], &b"q=1"[..]));
    }

    #[test]
    fn fields_are_parsed_again_on_demand() {
        let buf =
            b"POST /x HTTP/1.1\r\nCookie: a=b\r\nX-One: 1\r\ncookie: c=d\r\nContent-Length: 2\r\n\r\nhi";
        let fields = Fields::of(buf);
        assert_eq!(fields.iter().count(), 4);
        assert_eq!(
            fields.values("COOKIE").collect::<Vec<_>>(),
            [&b"a=b"[..], &b"c=d"[..]]
        );
        assert_eq!(fields.values("x-missing").count(), 0);
        assert_eq!(Fields::of(b"not http").iter().count(), 0);
    }

    #[test]
    fn fields_of_an_http2_header_map() {
        let mut map = http::HeaderMap::new();
        map.append("cookie", http::HeaderValue::from_static("a=b"));
        map.append("x-one", http::HeaderValue::from_static("1"));
        map.append("cookie", http::HeaderValue::from_static("c=d"));
        let fields = Fields::Map(&map);
        assert_eq!(fields.iter().count(), 3);
        assert_eq!(
            fields.values("Cookie").collect::<Vec<_>>(),
            [&b"a=b"[..], &b"c=d"[..]]
        );
    }

    #[test]
    fn malformed_input_is_rejected() {
        let cases: &[&[u8]] = &[
            b"THIS IS NOT HTTP\r\n\r\n",
            b"GET /hi HTTP/2.0\r\n\r\n",
            b"GET /hi HTTP/1.1\r\nBad Header\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
            b"\x00\x01\x02\xff\r\n\r\n",
        ];
        for case in cases {
            assert_eq!(
                parse_all(case),
                Err(ParseError::Malformed),
                "{:?}",
                String::from_utf8_lossy(case)
            );
        }
    }

    #[test]
    fn limits() {
        assert_eq!(
            parse_all(b"POST / HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n"),
            Err(ParseError::BodyTooLarge)
        );
        assert_eq!(
            parse_all(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffffff\r\n"),
            Err(ParseError::BodyTooLarge)
        );
        assert_eq!(
            parse_all(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            Err(ParseError::UnsupportedEncoding)
        );
        let mut long = b"GET /".to_vec();
        long.resize(MAX_HEAD + 10, b'a');
        assert_eq!(parse_all(&long), Err(ParseError::HeadTooLarge));
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(parse_all(&many), Err(ParseError::HeadTooLarge));
    }

    #[test]
    fn decimal() {
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_decimal(b"18446744073709551616"), None);
        assert_eq!(parse_decimal(b""), None);
        assert_eq!(parse_decimal(b"+1"), None);
        assert_eq!(parse_decimal(b"1x"), None);
    }
}
