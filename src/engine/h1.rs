//! HTTP/1.1 on the seam: each request loop owns a connection, and may
//! pipeline a round of requests on it (one write, then the responses in
//! order). The run's request is encoded once ([`RequestBytes`]); a plan's
//! is encoded for each send into the loop's own buffer.

use super::deadline::Timer;
use super::exchange::{Lost, Outgoing, Wire, WorkerCtx};
use super::protocol::Settled;
use super::{EngineError, Shared};
use crate::http1::response::KnownHead;
use crate::http1::{self, RequestBytes, ResponseReader};
use crate::net::Stream;
use crate::net::uring::Ring;
use crate::plan::Transport;
use crate::request::Request;
use crate::response::{Capture, ResponseHead};
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use std::rc::Rc;
use std::task::Poll;
use tokio::io::AsyncWrite;

/// HTTP/1.1, a connection per request loop.
pub struct H1;

impl Wire for H1 {
    type Request = RequestBytes;
    type Setup = ();
    /// The loops share the last response head read.
    type Lanes = KnownHead;
    type Way = H1Conn;

    fn encode(request: &Request<'_>, transport: &Transport) -> Result<RequestBytes, EngineError> {
        Ok(RequestBytes::encode(request, transport.keepalive).pipelined(transport.pipeline))
    }

    fn setup(_settled: &Settled) -> Result<(), EngineError> {
        Ok(())
    }

    fn lanes(_shared: &Shared<H1>, _ring: Option<&Rc<Ring>>) -> KnownHead {
        KnownHead::default()
    }

    fn way(ctx: &WorkerCtx<H1>) -> H1Conn {
        let mut conn = H1Conn::default();
        if ctx.connector.ring().is_some() {
            conn.socket.reader = ResponseReader::with_capacity(http1::response::SMALL_BUFFER);
        }
        conn
    }

    async fn connect(conn: &mut H1Conn, ctx: &WorkerCtx<H1>) -> Result<(), RequestError> {
        let socket = &mut conn.socket;
        if socket.stream.is_none() {
            socket.stream = Some(ctx.connector.connect(&ctx.recorder).await?);
            socket.reader.clear();
        }
        Ok(())
    }

    fn new_connection(conn: &mut H1Conn) {
        conn.socket.stream = None;
    }

    async fn round_trip(
        conn: &mut H1Conn,
        ctx: &WorkerCtx<H1>,
        outgoing: Outgoing<'_, RequestBytes>,
        timer: Timer<'_>,
        answered: impl FnMut(ResponseHead),
    ) -> Result<(), Lost> {
        conn.round_trip(ctx, outgoing, timer, answered).await
    }
}

/// An HTTP/1.1 loop's connection, and the buffer its plan requests are
/// encoded into.
#[derive(Default)]
pub struct H1Conn {
    pub(super) socket: Socket,
    /// A plan's request, encoded for each send (the run's own is encoded
    /// once, before the run).
    scratch: Vec<u8>,
}

/// The connection itself, reused across requests and phases.
#[derive(Default)]
pub(super) struct Socket {
    pub(super) stream: Option<Stream>,
    pub(super) reader: ResponseReader,
    /// Set while a request is on the wire; a connection left busy (its
    /// request was cancelled) is reconnected before reuse.
    pub(super) busy: bool,
}

/// How writing a request ended.
enum Written {
    /// Every byte went out.
    All,
    /// The server answered, closed or failed the connection before the
    /// request was fully written (a `413` to a large body): its response,
    /// if it sent one, is in the reader's buffer or on the socket; the
    /// write's own error, if any, is what to count when there is none.
    Cut(Option<RequestError>),
}

impl H1Conn {
    /// [`Wire::round_trip`] over HTTP/1.1: one write of the round's
    /// requests, then their responses in order.
    async fn round_trip(
        &mut self,
        ctx: &WorkerCtx<H1>,
        outgoing: Outgoing<'_, RequestBytes>,
        mut timer: Timer<'_>,
        answered: impl FnMut(ResponseHead),
    ) -> Result<(), Lost> {
        let shared = &ctx.shared;
        let (bytes, first, count, is_head, capture) = match outgoing {
            Outgoing::Fixed { request, count } => (
                request.repeat_slice(count),
                request.single,
                count,
                request.is_head,
                None,
            ),
            Outgoing::Rendered { request, capture } => {
                self.scratch.clear();
                http1::request::encode(&mut self.scratch, request, shared.transport.keepalive);
                (
                    &self.scratch[..],
                    self.scratch.len(),
                    1,
                    request.is_head(),
                    Some(capture),
                )
            }
            Outgoing::Written {
                text,
                requests,
                capture,
                ..
            } => {
                let spans = &text.spans[requests.clone()];
                let (first, last) = (&spans[0].whole, &spans[spans.len() - 1].whole);
                (
                    &text.bytes[first.start..last.end],
                    first.len(),
                    spans.len() as u32,
                    text.is_head(requests.start),
                    capture,
                )
            }
        };
        let socket = &mut self.socket;
        let send = socket.connect_and_write(ctx, bytes, first);
        let cut = match timer.within(send).await {
            Ok(Written::All) => None,
            Ok(Written::Cut(write_err)) => Some(write_err),
            Err(err) => {
                socket.stream = None;
                return Err(Lost { err, count });
            }
        };
        self.read_round(ctx, timer, count, is_head, capture, cut, answered)
            .await
    }

    /// Reads the responses to a round of `count` requests just written,
    /// in order; `cut` is set when the write was cut short (see
    /// [`Written::Cut`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn read_round(
        &mut self,
        ctx: &WorkerCtx<H1>,
        mut timer: Timer<'_>,
        count: u32,
        is_head: bool,
        mut capture: Option<&mut Capture>,
        cut: Option<Option<RequestError>>,
        mut answered: impl FnMut(ResponseHead),
    ) -> Result<(), Lost> {
        let shared = &ctx.shared;
        let socket = &mut self.socket;
        for done in 0..count {
            let stream = socket.stream.as_mut().expect("connected by connect_and_write");
            let read = socket.reader.read_response_into(
                stream,
                &ctx.sink,
                &ctx.lanes,
                is_head,
                capture.as_deref_mut(),
            );
            let mut head = match timer.within(read).await {
                Ok(head) => head,
                Err(err) => {
                    // This request and every later one of the round are
                    // lost; a request cut short failed as its write did.
                    socket.stream = None;
                    let err = cut.flatten().unwrap_or(err);
                    return Err(Lost {
                        err,
                        count: count - done,
                    });
                }
            };
            head.received_at = socket.stream.as_ref().and_then(Stream::received_at);
            answered(head);
            if head.close || !shared.transport.keepalive || cut.is_some() {
                socket.stream = None;
                let unanswered = count - done - 1;
                if unanswered > 0 {
                    let err = RequestError::new(
                        ErrorKind::Reset,
                        ErrorDetail::Static(
                            "the server closed the connection with pipelined requests unanswered",
                        ),
                    );
                    return Err(Lost {
                        err,
                        count: unanswered,
                    });
                }
                return Ok(());
            }
        }
        socket.busy = false;
        Ok(())
    }
}

impl Socket {
    /// Connects if there is no usable connection (none yet, or one left
    /// mid-request), marks it busy and writes `bytes` (whose first request
    /// is `first` bytes long), listening for an early answer while the
    /// socket is full.
    async fn connect_and_write(
        &mut self,
        ctx: &WorkerCtx<H1>,
        bytes: &[u8],
        first: usize,
    ) -> Result<Written, RequestError> {
        if self.busy || self.stream.is_none() {
            self.stream = None;
            self.stream = Some(ctx.connector.connect(&ctx.recorder).await?);
            self.reader.clear();
        }
        self.busy = true;
        let stream = self.stream.as_mut().expect("connected just above");
        Ok(write_listening(stream, &mut self.reader, bytes, first).await)
    }
}

/// Writes `bytes`; whenever the socket is full while the first request
/// (`first` bytes) is still going out, reads what the server sent
/// meanwhile, so a server that answers before the body is all sent (and
/// stops reading) is heard rather than waited on until the timeout. Once
/// the first request is out, a response is the pipelined answer to it, not
/// an early one, so later bytes are just written. A request that fits the
/// socket at once costs nothing more.
async fn write_listening(
    stream: &mut Stream,
    reader: &mut ResponseReader,
    bytes: &[u8],
    first: usize,
) -> Written {
    let mut written = 0;
    std::future::poll_fn(|cx| {
        while written < bytes.len() {
            match std::pin::Pin::new(&mut *stream).poll_write(cx, &bytes[written..]) {
                Poll::Ready(Ok(0)) => {
                    let err = std::io::Error::from(std::io::ErrorKind::WriteZero);
                    return Poll::Ready(Written::Cut(Some(RequestError::from_io(err))));
                }
                Poll::Ready(Ok(n)) => written += n,
                Poll::Ready(Err(err)) => return Poll::Ready(Written::Cut(Some(RequestError::from_io(err)))),
                Poll::Pending if written >= first => return Poll::Pending,
                Poll::Pending => {
                    return match reader.poll_early_answer(stream, cx) {
                        Poll::Pending => Poll::Pending,
                        Poll::Ready(Ok(())) => Poll::Ready(Written::Cut(None)),
                        Poll::Ready(Err(err)) => Poll::Ready(Written::Cut(Some(err))),
                    };
                }
            }
        }
        Poll::Ready(Written::All)
    })
    .await
}
