//! Reads HTTP/1.1 responses in place from a reused per-connection buffer.
//!
//! The body is counted and skipped, never kept: a load generator needs the
//! status, the byte count and whether the connection stays open. Bytes past
//! the end of one response stay in the buffer for the next one.
//!
//! Memory per connection matters at 10,000 connections, so a connection's
//! own buffer only needs to hold a response head (it starts small and grows
//! when a head does not fit); body bytes beyond what arrived with the head
//! are read into the worker's one shared [`BodySink`] and dropped.

use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use std::cell::RefCell;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

/// A worker's scratch space for body bytes nobody needs, shared by all its
/// connections. It is borrowed only inside one `poll_read`, never across an
/// await, so connections on the same thread never contend for it.
pub struct BodySink {
    buf: RefCell<Box<[u8]>>,
}

impl Default for BodySink {
    fn default() -> Self {
        BodySink {
            buf: RefCell::new(vec![0; SINK_SIZE].into_boxed_slice()),
        }
    }
}

impl BodySink {
    fn poll_discard<S: AsyncRead + Unpin>(
        &self,
        stream: &mut S,
        cx: &mut Context<'_>,
        max: usize,
    ) -> Poll<std::io::Result<usize>> {
        let mut buf = self.buf.borrow_mut();
        let len = max.min(buf.len());
        let mut read = ReadBuf::new(&mut buf[..len]);
        ready!(Pin::new(stream).poll_read(cx, &mut read))?;
        Poll::Ready(Ok(read.filled().len()))
    }

    /// Reads at most `max` bytes (never past the body, so a pipelined next
    /// response stays on the socket) and drops them; 0 means end of stream.
    async fn discard<S: AsyncRead + Unpin>(&self, stream: &mut S, max: u64) -> Result<usize, RequestError> {
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        std::future::poll_fn(|cx| self.poll_discard(stream, cx, max))
            .await
            .map_err(RequestError::from_io)
    }
}

/// Start size of a connection's buffer: a typical head and a small body
/// arrive in one read.
const INITIAL_BUFFER: usize = 2 * 1024;
/// Size of the shared sink body bytes are read into and dropped.
const SINK_SIZE: usize = 64 * 1024;
/// A response head larger than this is treated as a protocol error.
const MAX_HEAD: usize = 256 * 1024;
/// Header slots on the stack, enough for typical responses; a response with
/// more is parsed again with [`MAX_HEADERS`] slots on the heap (rare path).
const STACK_HEADERS: usize = 32;
const MAX_HEADERS: usize = 256;
/// A response read yields to the runtime after this many reads that found
/// bytes waiting: a server that sends faster than volley parses (endless
/// 1-byte chunks, a huge body on loopback) never leaves the socket empty,
/// and without a yield the request timeout and the run's deadline would
/// never get a turn. A normal response takes one or two reads.
const YIELD_READS: u32 = 32;

/// The most of a response body a plan keeps when it assigns the response
/// to a variable. A body is kept per connection, so without a cap one
/// huge (or endless) response would take the machine's memory; past it the
/// rest is read and dropped and the step fails ([`Capture::overflowed`]).
pub const MAX_KEPT_BODY: usize = 8 * 1024 * 1024;

/// What a scenario keeps of a response: Set-Cookie values always, and with
/// `full` (the response is assigned to a variable) every header and the body.
#[derive(Debug, Default)]
pub struct Capture {
    pub full: bool,
    pub headers: Vec<(String, String)>,
    /// At most [`MAX_KEPT_BODY`] bytes.
    pub body: Vec<u8>,
    /// The body was longer than [`MAX_KEPT_BODY`]: what was kept is not it.
    pub overflowed: bool,
    /// `name=value` of each Set-Cookie header.
    pub set_cookies: Vec<String>,
}

impl Capture {
    /// Empties it for the next response, keeping its allocations.
    pub fn clear(&mut self, full: bool) {
        self.full = full;
        self.headers.clear();
        self.body.clear();
        self.overflowed = false;
        self.set_cookies.clear();
    }

    /// Keeps body bytes (HTTP/1.1 or HTTP/2) up to [`MAX_KEPT_BODY`].
    pub fn keep_body(&mut self, bytes: &[u8]) {
        if self.body.len() + bytes.len() > MAX_KEPT_BODY {
            self.overflowed = true;
        } else {
            self.body.extend_from_slice(bytes);
        }
    }

    fn take_head(&mut self, head: &[u8]) {
        let mut slots = [httparse::EMPTY_HEADER; STACK_HEADERS];
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
            self.add_header(h.name, h.value);
        }
    }

    /// Keeps one response header (HTTP/1.1 or HTTP/2). Only Set-Cookie is
    /// needed on every response; the rest is copied (allocating) only for
    /// responses that are assigned.
    pub fn add_header(&mut self, name: &str, value: &[u8]) {
        if name.eq_ignore_ascii_case("set-cookie") {
            let value = String::from_utf8_lossy(value);
            let pair = value.split(';').next().unwrap_or_default().trim();
            if pair.contains('=') {
                self.set_cookies.push(pair.to_string());
            }
        }
        if self.full {
            self.headers.push((
                name.to_ascii_lowercase(),
                String::from_utf8_lossy(value).into_owned(),
            ));
        }
    }
}

/// Where body bytes go: dropped into the sink, or kept (up to the cap;
/// the rest goes to the sink).
enum BodyDest<'a> {
    Sink(&'a BodySink),
    Keep(&'a mut Capture, &'a BodySink),
}

impl BodyDest<'_> {
    /// Takes buffered body bytes.
    fn take(&mut self, bytes: &[u8]) {
        if let BodyDest::Keep(capture, _) = self {
            capture.keep_body(bytes);
        }
    }

    /// Reads at most `max` more body bytes from the stream; 0 at its end.
    async fn read<S: AsyncRead + Unpin>(&mut self, stream: &mut S, max: u64) -> Result<usize, RequestError> {
        match self {
            BodyDest::Sink(sink) => sink.discard(stream, max).await,
            BodyDest::Keep(capture, sink) => {
                let room = MAX_KEPT_BODY - capture.body.len().min(MAX_KEPT_BODY);
                if capture.overflowed || room == 0 {
                    let got = sink.discard(stream, max).await?;
                    capture.overflowed |= got > 0;
                    return Ok(got);
                }
                let out = &mut capture.body;
                let want = usize::try_from(max)
                    .unwrap_or(usize::MAX)
                    .min(SINK_SIZE)
                    .min(room);
                let old = out.len();
                out.resize(old + want, 0);
                let got = stream.read(&mut out[old..]).await.map_err(RequestError::from_io);
                out.truncate(old + *got.as_ref().unwrap_or(&0));
                got
            }
        }
    }
}

/// What the engine needs from a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    /// Bytes read for this response: head, body and chunk framing.
    pub bytes: u64,
    /// The server will close the connection after this response.
    pub close: bool,
}

/// How the end of a body is found (RFC 9112 section 6.3).
#[derive(Clone, Copy, Debug)]
enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// A connection's read buffer and parser.
pub struct ResponseReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Reads since this response began or the loop last yielded.
    reads: u32,
}

impl Default for ResponseReader {
    fn default() -> Self {
        ResponseReader {
            buf: vec![0; INITIAL_BUFFER],
            start: 0,
            end: 0,
            reads: 0,
        }
    }
}

fn closed_early(what: &'static str) -> RequestError {
    RequestError::new(ErrorKind::Reset, ErrorDetail::Static(what))
}

impl ResponseReader {
    /// Forgets buffered bytes (after a reconnect).
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// Counts one read; every [`YIELD_READS`] reads gives the runtime (its
    /// timers, the other connections) a turn.
    async fn pace(&mut self) {
        self.reads += 1;
        if self.reads >= YIELD_READS {
            self.reads = 0;
            tokio::task::yield_now().await;
        }
    }

    fn buffered(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Reads more bytes into the buffer; `Ok(0)` means end of stream.
    async fn fill<S: AsyncRead + Unpin>(&mut self, stream: &mut S) -> Result<usize, RequestError> {
        self.make_room()?;
        let n = stream
            .read(&mut self.buf[self.end..])
            .await
            .map_err(RequestError::from_io)?;
        self.end += n;
        self.pace().await;
        Ok(n)
    }

    /// While a request is still being written (its body fills the socket):
    /// reads what the server has sent so far into the buffer. `Ready` once
    /// the writer should stop: a final response head is buffered (the
    /// server answered early, say `413`), the server closed, or reading
    /// failed; `Pending` while there is nothing, or only interim (1xx)
    /// responses. The response is then read as usual from the buffer.
    pub fn poll_early_answer<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), RequestError>> {
        for _ in 0..YIELD_READS {
            if self.holds_final_head()? {
                return Poll::Ready(Ok(()));
            }
            self.make_room()?;
            let mut read = ReadBuf::new(&mut self.buf[self.end..]);
            ready!(Pin::new(&mut *stream).poll_read(cx, &mut read)).map_err(RequestError::from_io)?;
            match read.filled().len() {
                0 => return Poll::Ready(Ok(())),
                n => self.end += n,
            }
        }
        // A server streaming interim responses gets no more than its share.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Whether the buffer holds a final response head (after any interim).
    fn holds_final_head(&self) -> Result<bool, RequestError> {
        let mut at = self.start;
        while let Some((len, status, ..)) = parse_head(&self.buf[at..self.end], false)? {
            if !(100..200).contains(&status) || status == 101 {
                return Ok(true);
            }
            at += len;
        }
        Ok(false)
    }

    /// Makes room at the end of the buffer: moves what is unread to the
    /// front, or grows the buffer up to [`MAX_HEAD`].
    fn make_room(&mut self) -> Result<(), RequestError> {
        if self.start == self.end {
            self.clear();
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.buf.len() < MAX_HEAD {
                self.buf.resize(self.buf.len() * 2, 0);
            } else {
                return Err(RequestError::protocol("response head larger than 256 KiB"));
            }
        }
        Ok(())
    }

    /// Reads one complete response (skipping any 1xx interim responses).
    pub async fn read_response<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        sink: &BodySink,
        head_request: bool,
    ) -> Result<ResponseHead, RequestError> {
        self.read_response_into(stream, sink, head_request, None).await
    }

    /// Reads one response, capturing what `capture` asks for.
    pub async fn read_response_into<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        sink: &BodySink,
        head_request: bool,
        mut capture: Option<&mut Capture>,
    ) -> Result<ResponseHead, RequestError> {
        let mut bytes = 0u64;
        self.reads = 0;
        loop {
            let (head_len, status, framing, close) = self.read_head(stream, head_request).await?;
            if let Some(capture) = capture.as_deref_mut() {
                capture.take_head(&self.buf[self.start..self.start + head_len]);
            }
            self.start += head_len;
            bytes += head_len as u64;
            if (100..200).contains(&status) && status != 101 {
                continue;
            }
            let mut dest = match capture.as_deref_mut() {
                Some(c) if c.full => BodyDest::Keep(c, sink),
                _ => BodyDest::Sink(sink),
            };
            let (body, closed) = match framing {
                Framing::Empty => (0, false),
                Framing::Length(n) => (self.skip(stream, &mut dest, n).await?, false),
                Framing::Chunked => (self.skip_chunked(stream, &mut dest).await?, false),
                Framing::UntilClose => (self.skip_to_eof(stream, &mut dest).await?, true),
            };
            bytes += body;
            return Ok(ResponseHead {
                status,
                bytes,
                // After a `101` the connection speaks another protocol
                // (volley never asks for one): it cannot carry a next request.
                close: close || closed || status == 101,
            });
        }
    }

    async fn read_head<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        head_request: bool,
    ) -> Result<ParsedHead, RequestError> {
        loop {
            if let Some(parsed) = parse_head(self.buffered(), head_request)? {
                return Ok(parsed);
            }
            if self.fill(stream).await? == 0 {
                return Err(if self.start == self.end {
                    closed_early("connection closed by the server before any response")
                } else {
                    closed_early("connection closed in the middle of the response head")
                });
            }
        }
    }

    /// Consumes `n` body bytes: first what is buffered, then straight from
    /// the socket into `dest`. Returns `n`.
    async fn skip<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        dest: &mut BodyDest<'_>,
        n: u64,
    ) -> Result<u64, RequestError> {
        let buffered = n.min((self.end - self.start) as u64);
        dest.take(&self.buf[self.start..self.start + buffered as usize]);
        self.start += buffered as usize;
        let mut left = n - buffered;
        while left > 0 {
            match dest.read(stream, left).await? {
                0 => {
                    return Err(closed_early(
                        "connection closed in the middle of the response body",
                    ));
                }
                got => left -= got as u64,
            }
            self.pace().await;
        }
        Ok(n)
    }

    async fn skip_to_eof<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        dest: &mut BodyDest<'_>,
    ) -> Result<u64, RequestError> {
        let mut total = (self.end - self.start) as u64;
        dest.take(&self.buf[self.start..self.end]);
        self.clear();
        loop {
            match dest.read(stream, u64::MAX).await? {
                0 => return Ok(total),
                got => total += got as u64,
            }
            self.pace().await;
        }
    }

    /// Consumes a chunked body including its trailers; returns the bytes
    /// consumed (sizes, data and framing).
    async fn skip_chunked<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        dest: &mut BodyDest<'_>,
    ) -> Result<u64, RequestError> {
        let mut total = 0u64;
        loop {
            let size = loop {
                // httparse reads an empty size line as 0; RFC 9112 wants
                // at least one hex digit.
                if self.buffered().first().is_some_and(|b| !b.is_ascii_hexdigit()) {
                    return Err(RequestError::protocol("invalid chunk size line"));
                }
                match httparse::parse_chunk_size(self.buffered()) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        self.start += used;
                        total += used as u64;
                        break size;
                    }
                    Ok(httparse::Status::Partial) => {
                        if self.fill(stream).await? == 0 {
                            return Err(closed_early("connection closed in the middle of a chunked body"));
                        }
                    }
                    Err(_) => return Err(RequestError::protocol("invalid chunk size line")),
                }
            };
            if size == 0 {
                return Ok(total + self.skip_trailers(stream).await?);
            }
            total += self.skip(stream, dest, size).await?;
            total += self.expect_crlf(stream).await?;
        }
    }

    async fn expect_crlf<S: AsyncRead + Unpin>(&mut self, stream: &mut S) -> Result<u64, RequestError> {
        while self.end - self.start < 2 {
            if self.fill(stream).await? == 0 {
                return Err(closed_early("connection closed in the middle of a chunked body"));
            }
        }
        if self.buffered()[..2] != *b"\r\n" {
            return Err(RequestError::protocol("chunk data not followed by CRLF"));
        }
        self.start += 2;
        Ok(2)
    }

    /// Trailer lines end with an empty line.
    async fn skip_trailers<S: AsyncRead + Unpin>(&mut self, stream: &mut S) -> Result<u64, RequestError> {
        let mut total = 0u64;
        loop {
            match self.buffered().iter().position(|b| *b == b'\n') {
                Some(pos) => {
                    let empty = pos == 0 || (pos == 1 && self.buffered()[0] == b'\r');
                    self.start += pos + 1;
                    total += pos as u64 + 1;
                    if empty {
                        return Ok(total);
                    }
                }
                None => {
                    if self.fill(stream).await? == 0 {
                        return Err(closed_early(
                            "connection closed in the middle of chunked trailers",
                        ));
                    }
                }
            }
        }
    }
}

/// Parses a complete head, or returns `None` when more bytes are needed.
fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<ParsedHead>, RequestError> {
    let mut slots = [httparse::EMPTY_HEADER; STACK_HEADERS];
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

type ParsedHead = (usize, u16, Framing, bool);

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
    Ok(interpret(head_len, &response, head_request))
}

/// Reads status, framing and connection handling from a parsed head.
fn interpret(
    head_len: usize,
    response: &httparse::Response<'_, '_>,
    head_request: bool,
) -> Result<Option<ParsedHead>, RequestError> {
    let status = response.code.unwrap_or(0);
    let mut close = response.version == Some(0);
    let mut length: Option<u64> = None;
    let mut chunked = false;
    for header in response.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("content-length") {
            // Digits only (RFC 9112 section 6.3): Rust's parser would also
            // take a sign, `+2`.
            let value = std::str::from_utf8(header.value)
                .ok()
                .map(str::trim)
                .filter(|v| v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| RequestError::protocol("invalid Content-Length"))?;
            if length.is_some_and(|l| l != value) {
                return Err(RequestError::protocol("conflicting Content-Length headers"));
            }
            length = Some(value);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = header
                .value
                .rsplit(|b| *b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case("connection") {
            for token in header.value.split(|b| *b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    close = false;
                }
            }
        }
    }
    let framing = if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Empty
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::UntilClose
    };
    Ok(Some((head_len, status, framing, close)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds the reader from fixed pieces, one piece per read, to exercise
    /// every partial-input path.
    struct Pieces(std::collections::VecDeque<Vec<u8>>);

    impl AsyncRead for Pieces {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            if let Some(mut piece) = self.0.pop_front() {
                let n = piece.len().min(buf.remaining());
                buf.put_slice(&piece[..n]);
                if n < piece.len() {
                    self.0.push_front(piece.split_off(n));
                }
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    fn pieces(parts: &[&[u8]]) -> Pieces {
        Pieces(parts.iter().map(|p| p.to_vec()).collect())
    }

    fn read(parts: &[&[u8]], head: bool) -> Result<ResponseHead, RequestError> {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut reader = ResponseReader::default();
        rt.block_on(reader.read_response(&mut pieces(parts), &BodySink::default(), head))
    }

    #[test]
    fn content_length_split_across_reads() {
        let head = read(
            &[b"HTTP/1.1 200 OK\r\nContent-", b"Length: 5\r\n\r\nwo", b"rld"],
            false,
        )
        .unwrap();
        assert_eq!(
            head,
            ResponseHead {
                status: 200,
                bytes: 43,
                close: false
            }
        );
    }

    #[test]
    fn chunked_with_trailers_byte_by_byte() {
        let whole = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\n";
        let parts: Vec<&[u8]> = whole.chunks(1).collect();
        let head = read(&parts, false).unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(head.bytes, whole.len() as u64);
    }

    #[test]
    fn close_delimited_body_reads_to_eof() {
        let head = read(&[b"HTTP/1.0 200 OK\r\n\r\n", b"abc", b"def"], false).unwrap();
        assert_eq!(head.bytes, 25);
        assert!(head.close);
    }

    #[test]
    fn head_and_204_have_no_body() {
        let head = read(&[b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"], true).unwrap();
        assert_eq!(head.status, 200);
        let head = read(&[b"HTTP/1.1 204 No Content\r\nContent-Length: 99\r\n\r\n"], false).unwrap();
        assert_eq!(head.status, 204);
    }

    #[test]
    fn interim_100_is_skipped_and_close_is_seen() {
        let head = read(
            &[b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"],
            false,
        )
        .unwrap();
        assert_eq!(head.status, 201);
        assert!(head.close);
    }

    #[test]
    fn pipelined_responses_keep_leftover_bytes() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut reader = ResponseReader::default();
        let mut input = pieces(&[
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 404 NF\r\nContent-Length: 2\r\n\r\nbb",
        ]);
        let sink = BodySink::default();
        let first = rt
            .block_on(reader.read_response(&mut input, &sink, false))
            .unwrap();
        let second = rt
            .block_on(reader.read_response(&mut input, &sink, false))
            .unwrap();
        assert_eq!((first.status, second.status), (200, 404));
        assert!(reader.buffered().is_empty());
    }

    #[test]
    fn large_body_goes_through_the_sink_and_stops_at_its_end() {
        let body = vec![b'x'; 200_000];
        let mut first = b"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n".to_vec();
        first.extend_from_slice(&body);
        let next = b"HTTP/1.1 204 No Content\r\n\r\n";
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut reader = ResponseReader::default();
        let sink = BodySink::default();
        let mut input = pieces(&[&first, next]);
        let head = rt
            .block_on(reader.read_response(&mut input, &sink, false))
            .unwrap();
        assert_eq!(head.bytes, first.len() as u64);
        assert!(
            reader.buf.len() <= INITIAL_BUFFER,
            "the body did not grow the head buffer"
        );
        let head = rt
            .block_on(reader.read_response(&mut input, &sink, false))
            .unwrap();
        assert_eq!(
            head.status, 204,
            "the next response was not swallowed by the body skip"
        );
    }

    #[test]
    fn capture_keeps_headers_body_and_cookies() {
        let whole = b"HTTP/1.1 200 OK\r\nSet-Cookie: session=abc; Path=/\r\nX-Token: t1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n";
        let parts: Vec<&[u8]> = whole.chunks(7).collect();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut reader = ResponseReader::default();
        let mut capture = Capture::default();
        capture.clear(true);
        let head = rt
            .block_on(reader.read_response_into(
                &mut pieces(&parts),
                &BodySink::default(),
                false,
                Some(&mut capture),
            ))
            .unwrap();
        assert_eq!(head.bytes, whole.len() as u64);
        assert_eq!(capture.body, br#"{"a":1}"#);
        assert_eq!(capture.set_cookies, vec!["session=abc".to_string()]);
        assert!(
            capture
                .headers
                .contains(&("x-token".to_string(), "t1".to_string()))
        );
        // Without `full` only the cookies are kept.
        let mut light = Capture::default();
        let mut reader = ResponseReader::default();
        rt.block_on(reader.read_response_into(
            &mut pieces(&[whole]),
            &BodySink::default(),
            false,
            Some(&mut light),
        ))
        .unwrap();
        assert!(light.body.is_empty() && light.headers.is_empty());
        assert_eq!(light.set_cookies.len(), 1);
    }

    #[test]
    fn errors_have_the_right_kind() {
        let garbage = read(&[b"NOT HTTP AT ALL\r\n\r\n"], false).unwrap_err();
        assert_eq!(garbage.kind, ErrorKind::Protocol);
        let eof = read(&[], false).unwrap_err();
        assert_eq!(eof.kind, ErrorKind::Reset);
        assert!(eof.message().contains("before any response"));
        let short = read(&[b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"], false).unwrap_err();
        assert_eq!(short.kind, ErrorKind::Reset);
        let bad_len = read(&[b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"], false).unwrap_err();
        assert_eq!(bad_len.kind, ErrorKind::Protocol);
        let signed = read(&[b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nab"], false).unwrap_err();
        assert_eq!(signed.kind, ErrorKind::Protocol);
        let empty_size = read(
            &[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n"],
            false,
        )
        .unwrap_err();
        assert_eq!(empty_size.kind, ErrorKind::Protocol);
    }
}
