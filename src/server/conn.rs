//! One HTTP/1.1 connection of the embedded target server, plain or TLS: the
//! read/parse/respond loop, its buffers, and the HTTP/1.1 rendering of what
//! the endpoints answer.
//!
//! The buffers are per connection and reused across requests, so a
//! keep-alive connection answering `/hi` does not allocate. Pipelined
//! requests are answered in order from the bytes already read, and their
//! responses are batched into one write, the way a load tester that
//! pipelines expects a fast server to behave.
//!
//! Every write of response bytes first waits out a `/pause` in force, and
//! the in-flight slots of requests whose responses are queued are given back
//! only once those bytes are written.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::OwnedSemaphorePermit;

use super::reply::{self, Answer, Body, GARBAGE, Headers, Incoming, Reply};
use super::request::{ParseError, Request, RequestParser};
use super::response::{self, Persistence};
use super::routes::{self, Route};
use super::{Io, Shared};

/// Initial size of each buffer, and the least free space offered to a read.
pub(super) const BUF_SIZE: usize = 8 * 1024;
/// Buffers grown past this by one big request are dropped afterwards, so an
/// idle connection does not keep a large body resident.
const KEEP_CAPACITY: usize = 1024 * 1024;
/// Queued responses are written out once this much is pending, even if more
/// pipelined requests are waiting, to bound the write buffer.
const FLUSH_AT: usize = 64 * 1024;
/// Bodies above this are written straight from where they are rather than
/// copied into the write buffer.
const COPY_LIMIT: usize = 64 * 1024;
/// After our FIN, how long and how much we keep reading (and discarding)
/// before closing: closing with unread bytes sends an RST, which can make the
/// client lose the response it has not read yet.
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1024 * 1024;

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// What the connection does after a response.
enum Next {
    KeepAlive,
    /// Flush, send FIN, drain what the client still sends, close.
    Close,
    /// Already finished with (the client is gone, or the endpoint closed it).
    Done,
}

impl Next {
    fn after(persistence: Persistence) -> Self {
        match persistence {
            Persistence::Close => Next::Close,
            Persistence::KeepAlive | Persistence::KeepAlive10 => Next::KeepAlive,
        }
    }
}

/// Bytes read from the client and not yet consumed by a complete request.
struct Input {
    buf: Vec<u8>,
    /// Where the current request starts in `buf`.
    start: usize,
    parser: RequestParser,
}

impl Input {
    /// Starts with `read`, the bytes read before the protocol was known.
    fn new(mut read: Vec<u8>) -> Self {
        read.reserve(BUF_SIZE.saturating_sub(read.len()));
        Self {
            buf: read,
            start: 0,
            parser: RequestParser::new(),
        }
    }

    /// The current request's bytes (and whatever follows it).
    fn request(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    fn body(&self, req: &Request) -> &[u8] {
        self.parser.body(self.request(), req)
    }

    fn consume(&mut self, len: usize) {
        self.start = (self.start + len).min(self.buf.len());
        if self.start == self.buf.len() {
            self.start = 0;
            if self.buf.capacity() > KEEP_CAPACITY {
                self.buf = Vec::with_capacity(BUF_SIZE);
            } else {
                self.buf.clear();
            }
        }
    }

    /// Reads more bytes after the unconsumed ones; `Ok(0)` is EOF.
    async fn read_more(&mut self, stream: &mut (impl AsyncRead + Unpin)) -> io::Result<usize> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        if self.buf.capacity() - self.buf.len() < BUF_SIZE / 2 {
            self.buf.reserve(BUF_SIZE);
        }
        stream.read_buf(&mut self.buf).await
    }

    /// Reads and throws away until EOF or an error, holding at most one
    /// buffer's worth; gives up after `limit` bytes.
    async fn discard_until_eof(&mut self, stream: &mut (impl AsyncRead + Unpin), limit: usize) {
        self.start = 0;
        let mut seen = 0;
        loop {
            self.buf.clear();
            match stream.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen += n,
            }
            if seen > limit {
                return;
            }
        }
    }
}

/// Responses queued but not yet written.
struct Output {
    buf: Vec<u8>,
    /// Responses whose last byte is queued or written, to be counted as
    /// completed at the next successful flush.
    finished: u64,
    /// In-flight slots of the requests whose responses are in `buf`, given
    /// back at the next successful flush (merged into one permit, so holding
    /// many costs no allocation).
    slots: Option<OwnedSemaphorePermit>,
    shared: Arc<Shared>,
}

impl Output {
    fn head(
        &mut self,
        status: u16,
        content_type: Option<&[u8]>,
        content_length: u64,
        persistence: Persistence,
    ) {
        response::write_head(&mut self.buf, status, content_type, content_length, persistence);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Marks the response being queued or written as complete.
    fn finish(&mut self) {
        self.finished += 1;
    }

    /// Keeps a request's in-flight slot until its response, now queued or
    /// written, is all on the socket.
    fn release_when_written(&mut self, slot: Option<OwnedSemaphorePermit>) {
        let Some(slot) = slot else { return };
        if self.buf.is_empty() {
            // Written already, straight from the handler: give it back now.
            return;
        }
        match &mut self.slots {
            Some(held) => held.merge(slot),
            None => self.slots = Some(slot),
        }
    }

    async fn flush(&mut self, stream: &mut (impl AsyncWrite + Unpin)) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.shared.pause.hold().await;
            stream.write_all(&self.buf).await?;
            if self.buf.capacity() > KEEP_CAPACITY {
                self.buf = Vec::with_capacity(BUF_SIZE);
            } else {
                self.buf.clear();
            }
        }
        if self.finished > 0 {
            self.shared
                .requests_completed
                .fetch_add(std::mem::take(&mut self.finished), Relaxed);
        }
        self.slots = None;
        Ok(())
    }

    /// Writes `bytes` straight to the socket, after any pause: for the
    /// endpoints that write past the buffer.
    async fn write_direct(&self, stream: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> io::Result<()> {
        self.shared.pause.hold().await;
        stream.write_all(bytes).await
    }

    /// Writes `body` after everything queued: copied if small, straight
    /// from where it is if not.
    async fn body(&mut self, stream: &mut (impl AsyncWrite + Unpin), body: &[u8]) -> io::Result<()> {
        if body.len() <= COPY_LIMIT {
            self.bytes(body);
            Ok(())
        } else {
            self.flush(stream).await?;
            self.write_direct(stream, body).await
        }
    }

    /// Waits for one of the server's in-flight slots, when it has a limit;
    /// `Ok(None)` when it has none. An error is a failed write: the
    /// connection is over.
    async fn slot(
        &mut self,
        stream: &mut (impl AsyncWrite + Unpin),
    ) -> io::Result<Option<OwnedSemaphorePermit>> {
        let Some(limit) = &self.shared.limit else {
            return Ok(None);
        };
        let limit = Arc::clone(limit);
        if let Ok(slot) = Arc::clone(&limit).try_acquire_owned() {
            return Ok(Some(slot));
        }
        // Responses queued here hold slots until written: write them before
        // waiting, or a pipelining connection could wait for itself.
        self.flush(stream).await?;
        // The semaphore is never closed, so this waits rather than fails.
        Ok(limit.acquire_owned().await.ok())
    }

    /// Queues `reply`, or writes it straight to the socket where the body
    /// is large or dripped.
    async fn reply(
        &mut self,
        stream: &mut (impl AsyncWrite + Unpin),
        reply: Reply<'_>,
        head_only: bool,
        persistence: Persistence,
    ) -> Next {
        // A server that speaks HTTP/3 too says so on every response, as
        // Caddy does; the pre-built `/hi` responses do not.
        let alt_svc = self.shared.alt_svc.get().map(http::HeaderValue::as_bytes);
        if let Some(whole) = response::prebuilt(&reply, persistence, head_only).filter(|_| alt_svc.is_none())
        {
            self.bytes(whole);
        } else {
            response::write_head_with(
                &mut self.buf,
                reply.status,
                reply.content_type,
                &reply.fields,
                alt_svc,
                reply.body.len(),
                persistence,
            );
            if reply.sends_body(head_only) && self.reply_body(stream, reply.body).await.is_err() {
                return Next::Done;
            }
        }
        self.finish();
        Next::after(persistence)
    }

    async fn reply_body(&mut self, stream: &mut (impl AsyncWrite + Unpin), body: Body<'_>) -> io::Result<()> {
        match body {
            Body::Static(bytes) | Body::Borrowed(bytes) => self.body(stream, bytes).await,
            Body::Owned(bytes) => self.body(stream, &bytes).await,
            Body::Fill(n) => {
                for piece in reply::fill(n) {
                    self.body(stream, piece).await?;
                }
                Ok(())
            }
            Body::Drip(total) => {
                // The head goes out at once, the body after it byte by byte.
                self.flush(stream).await?;
                for (due, byte) in reply::drip(tokio::time::Instant::now(), total) {
                    tokio::time::sleep_until(due).await;
                    self.write_direct(stream, byte).await?;
                }
                Ok(())
            }
        }
    }
}

struct Conn<S> {
    stream: S,
    input: Input,
    out: Output,
    shared: Arc<Shared>,
}

/// Serves HTTP/1.1 on `stream` until either side closes it. `read` holds
/// the bytes read from it while telling its protocol.
pub(super) async fn serve(stream: impl Io, shared: Arc<Shared>, read: Vec<u8>) {
    let mut conn = Conn {
        stream,
        input: Input::new(read),
        out: Output {
            buf: Vec::with_capacity(BUF_SIZE),
            finished: 0,
            slots: None,
            shared: Arc::clone(&shared),
        },
        shared,
    };
    conn.run().await;
}

impl<S: Io> Conn<S> {
    async fn flush(&mut self) -> io::Result<()> {
        self.out.flush(&mut self.stream).await
    }

    async fn run(&mut self) {
        loop {
            let parsed = {
                let Input { buf, start, parser } = &mut self.input;
                parser.parse(&buf[*start..])
            };
            match parsed {
                Ok(Some(req)) => {
                    self.shared.requests_received.fetch_add(1, Relaxed);
                    match self.respond(&req).await {
                        Next::KeepAlive => {
                            self.input.consume(req.len);
                            if self.out.buf.len() >= FLUSH_AT && self.flush().await.is_err() {
                                return;
                            }
                        }
                        Next::Close => return self.close().await,
                        Next::Done => return,
                    }
                }
                Ok(None) => {
                    if self.input.parser.take_continue() {
                        self.out.bytes(CONTINUE);
                    }
                    // Everything answerable is answered: send it before
                    // waiting for the client.
                    if self.flush().await.is_err() {
                        return;
                    }
                    match self.input.read_more(&mut self.stream).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                }
                Err(e) => {
                    self.reject(e);
                    return self.close().await;
                }
            }
        }
    }

    /// Answers one request, first waiting for an in-flight slot if the
    /// server has a limit and the endpoint counts against it.
    async fn respond(&mut self, req: &Request) -> Next {
        let Conn {
            stream,
            input,
            out,
            shared,
        } = self;
        let request = input.request();
        let incoming = Incoming {
            method: req.head.method,
            method_name: request.split(|&b| b == b' ').next().unwrap_or_default(),
            path: request.get(req.head.path.clone()).unwrap_or_default(),
            query: request.get(req.head.query.clone()).unwrap_or_default(),
            content_type: req.head.content_type.clone().and_then(|range| request.get(range)),
            headers: Headers::Http1(request),
            body: input.body(req),
        };
        let route = Route::of(incoming.path);
        let slot = if route.takes_slot() {
            match out.slot(stream).await {
                Ok(slot) => slot,
                Err(_) => return Next::Done,
            }
        } else {
            None
        };
        if route.waits() && out.flush(stream).await.is_err() {
            return Next::Done;
        }
        let head_only = incoming.head_only();
        let persistence = Persistence::for_request(&req.head);
        let next = match routes::answer(route, &incoming, shared).await {
            Answer::Reply(reply) => out.reply(stream, reply, head_only, persistence).await,
            Answer::Drop => Next::Close,
            Answer::Stall => {
                // Never answered: wait for the client to give up and close.
                if out.flush(stream).await.is_ok() {
                    input.discard_until_eof(stream, usize::MAX).await;
                }
                Next::Done
            }
            Answer::Garbage => {
                out.bytes(GARBAGE);
                Next::Close
            }
        };
        out.release_when_written(slot);
        next
    }

    /// Queues the answer to a request that could not be parsed; the
    /// connection is closed after it, since where the next request would
    /// start is unknown.
    fn reject(&mut self, e: ParseError) {
        let mut body = e.to_string();
        body.push('\n');
        self.out.head(
            e.status(),
            Some(b"text/plain"),
            body.len() as u64,
            Persistence::Close,
        );
        self.out.bytes(body.as_bytes());
    }

    /// Closes cleanly: queued bytes, then FIN, then drain, so the client
    /// sees EOF after the last response and no RST.
    async fn close(&mut self) {
        if self.flush().await.is_err() {
            return;
        }
        // The FIN answers a request too (`/drop`), so it waits out a pause
        // like any response.
        self.shared.pause.hold().await;
        if self.stream.shutdown().await.is_err() {
            return;
        }
        let _ = tokio::time::timeout(
            LINGER_TIME,
            self.input.discard_until_eof(&mut self.stream, LINGER_BYTES),
        )
        .await;
    }
}
