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

mod chunked;
mod fields;

use chunked::{CHUNK_OVERHEAD, decode_chunks};
pub(super) use fields::Fields;

/// Longest request head accepted; a client still sending its head past this
/// is either broken or hostile.
pub(super) const MAX_HEAD: usize = 64 * 1024;
/// Headers per request; `httparse` needs a fixed array, kept on the stack.
pub(super) const MAX_HEADERS: usize = 64;
/// Largest request body accepted (`413` above).
pub(super) const MAX_BODY: usize = 64 * 1024 * 1024;

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
mod tests;
