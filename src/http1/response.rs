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

use super::body::BodyDest;
use super::head;
use crate::response::{BodySink, Capture, ResponseHead};

/// Start size of a connection's buffer: a typical head and a small body
/// arrive in one read.
const INITIAL_BUFFER: usize = 2 * 1024;
/// Start size for a socket whose received bytes already wait in memory
/// (io_uring's buffers): another read is a copy, not a system call, so the
/// buffer need only hold a typical head; at 10,000 connections that is
/// 15 MB less.
pub const SMALL_BUFFER: usize = 512;
/// A response head larger than this is treated as a protocol error.
const MAX_HEAD: usize = 256 * 1024;
const MAX_HEADERS: usize = 256;
/// A response read yields to the runtime after this many reads that found
/// bytes waiting: a server that sends faster than volley parses (endless
/// 1-byte chunks, a huge body on loopback) never leaves the socket empty,
/// and without a yield the request timeout and the run's deadline would
/// never get a turn. A normal response takes one or two reads.
const YIELD_READS: u32 = 32;

/// How the end of a body is found (RFC 9112 section 6.3).
#[derive(Clone, Copy, Debug, PartialEq)]
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
        ResponseReader::with_capacity(INITIAL_BUFFER)
    }
}

fn closed_early(what: &'static str) -> RequestError {
    RequestError::new(ErrorKind::Reset, ErrorDetail::Static(what))
}

impl ResponseReader {
    /// A reader whose buffer starts at `bytes` (it grows for a larger head).
    pub fn with_capacity(bytes: usize) -> ResponseReader {
        ResponseReader {
            buf: vec![0; bytes],
            start: 0,
            end: 0,
            reads: 0,
        }
    }

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

    /// Whether no received byte waits in this reader.
    pub fn holds_nothing(&self) -> bool {
        self.start == self.end
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
        while let Some(ParsedHead { len, status, .. }) = parse_head(&self.buf[at..self.end], false)? {
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
    /// Bodies go to the worker's `sink`; `known` is its last head.
    pub async fn read_response<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        sink: &BodySink,
        known: &KnownHead,
        head_request: bool,
    ) -> Result<ResponseHead, RequestError> {
        self.read_response_into(stream, sink, known, head_request, None)
            .await
    }

    /// Reads one response, capturing what `capture` asks for.
    pub async fn read_response_into<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        sink: &BodySink,
        known: &KnownHead,
        head_request: bool,
        mut capture: Option<&mut Capture>,
    ) -> Result<ResponseHead, RequestError> {
        let mut bytes = 0u64;
        self.reads = 0;
        loop {
            let ParsedHead {
                len: head_len,
                status,
                framing,
                close,
                h3_offer,
            } = self.read_head(stream, known, head_request).await?;
            if let Some(capture) = capture.as_deref_mut() {
                capture_head(capture, &self.buf[self.start..self.start + head_len]);
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
                h3_offer,
                sent_at: None,
                received_at: None,
            });
        }
    }

    /// Reads one response outside any async state machine, for the common
    /// case: a final response whose body has a known length (or none) and
    /// fits the buffer with its head. `Ready(Ok(Some(head)))` once it is
    /// all in and consumed; `Ready(Ok(None))` for any other response
    /// (interim, chunked, until close, larger than the buffer), with
    /// nothing consumed, for [`Self::read_response_into`] to read as
    /// usual; `Pending` until more bytes arrive. Written out as a poll
    /// because the request loop's HTTP/1.1 fast path polls it directly:
    /// the nested futures of the general path spread one connection's
    /// state over many cache lines, which at thousands of connections cost
    /// more than the parsing itself. `known` is the worker's last head.
    pub fn poll_whole_response<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        cx: &mut Context<'_>,
        head_request: bool,
        known: &KnownHead,
    ) -> Poll<Result<Option<ResponseHead>, RequestError>> {
        loop {
            let has_head = match self.whole_response(self.buffered(), head_request, known)? {
                Whole::Response(head) => {
                    self.start += head.bytes as usize;
                    return Poll::Ready(Ok(Some(head)));
                }
                Whole::Other => return Poll::Ready(Ok(None)),
                Whole::Part { has_head } => has_head,
            };
            self.make_room()?;
            let mut room = ReadBuf::new(&mut self.buf[self.end..]);
            ready!(Pin::new(&mut *stream).poll_read(cx, &mut room)).map_err(RequestError::from_io)?;
            let n = room.filled().len();
            if n == 0 {
                return Poll::Ready(Err(if has_head {
                    closed_early("connection closed in the middle of the response body")
                } else if self.start == self.end {
                    closed_early("connection closed by the server before any response")
                } else {
                    closed_early("connection closed in the middle of the response head")
                }));
            }
            self.end += n;
        }
    }

    /// The response at the start of `bytes`, received but not yet in this
    /// reader's buffer (a ring's own buffer), read where it is: `Some` with
    /// its head (`bytes` says how many to consume) when
    /// [`Self::poll_whole_response`] would read it from there whole, `None`
    /// for anything else (part of a response, one that it hands on, a bad
    /// one), to be copied in and read as usual. Only while this reader holds
    /// nothing: a response does not begin in the middle of one.
    pub fn whole_response_in_place(
        &self,
        bytes: &[u8],
        head_request: bool,
        known: &KnownHead,
    ) -> Option<ResponseHead> {
        if !self.holds_nothing() {
            return None;
        }
        match self.whole_response(bytes, head_request, known) {
            Ok(Whole::Response(head)) => Some(head),
            _ => None,
        }
    }

    /// Whether `buf` begins with a response [`Self::poll_whole_response`]
    /// reads: final, with a body of known length (or none), fitting this
    /// reader's buffer with its head.
    fn whole_response(
        &self,
        buf: &[u8],
        head_request: bool,
        known: &KnownHead,
    ) -> Result<Whole, RequestError> {
        let Some(parsed) = known.parse(buf, head_request)? else {
            return Ok(Whole::Part { has_head: false });
        };
        let body = match parsed.framing {
            Framing::Empty => 0,
            Framing::Length(n) => n,
            Framing::Chunked | Framing::UntilClose => return Ok(Whole::Other),
        };
        let whole = parsed.len as u64 + body;
        if (100..200).contains(&parsed.status) || whole > self.buf.len() as u64 {
            return Ok(Whole::Other);
        }
        if whole > buf.len() as u64 {
            return Ok(Whole::Part { has_head: true });
        }
        Ok(Whole::Response(ResponseHead {
            status: parsed.status,
            bytes: whole,
            close: parsed.close,
            h3_offer: parsed.h3_offer,
            sent_at: None,
            received_at: None,
        }))
    }

    async fn read_head<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        known: &KnownHead,
        head_request: bool,
    ) -> Result<ParsedHead, RequestError> {
        loop {
            if let Some(parsed) = known.parse(self.buffered(), head_request)? {
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

/// Parses a complete head, or returns `None` when more bytes are needed:
/// the usual head by volley's own scanner, any other by httparse.
fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<ParsedHead>, RequestError> {
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

/// What [`ResponseReader::whole_response`] found.
enum Whole {
    /// A response read whole: its head, `bytes` long with its body.
    Response(ResponseHead),
    /// A response the fast path hands on (see
    /// [`ResponseReader::poll_whole_response`]).
    Other,
    /// The start of a response, its head read or not yet.
    Part { has_head: bool },
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
    last: RefCell<Option<(Vec<u8>, bool, ParsedHead)>>,
}

impl KnownHead {
    /// [`parse_head`], answered from the last head when `buf` begins with it.
    fn parse(&self, buf: &[u8], head_request: bool) -> Result<Option<ParsedHead>, RequestError> {
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
struct ParsedHead {
    len: usize,
    status: u16,
    framing: Framing,
    close: bool,
    h3_offer: Option<u16>,
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
fn capture_head(capture: &mut Capture, head: &[u8]) {
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
mod tests;
