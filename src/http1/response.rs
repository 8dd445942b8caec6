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
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

use super::body::BodyDest;
use super::parse::{Framing, ParsedHead, capture_head, parse_head};
pub use super::parse::{KnownHead, scanner_agrees_with_httparse};
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
/// A response read yields to the runtime after this many reads that found
/// bytes waiting: a server that sends faster than volley parses (endless
/// 1-byte chunks, a huge body on loopback) never leaves the socket empty,
/// and without a yield the request timeout and the run's deadline would
/// never get a turn. A normal response takes one or two reads.
const YIELD_READS: u32 = 32;

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

#[cfg(test)]
mod tests;
