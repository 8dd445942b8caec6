//! The protocol driver below both request loops: one connection's (or one
//! HTTP/2 lane's) [`Driver`] and its one `round_trip`.
//!
//! The protocol is settled once per run ([`super::Protocol`]) and becomes
//! the driver's variant when a loop starts; everything the two protocols
//! share (the deadline, connecting when needed, dropping a connection that
//! failed or was closed, handing each response on in order) is written here
//! once. HTTP/1.1 owns a connection per loop and may pipeline a round of
//! requests on it; over HTTP/2 each loop is a lane on a connection shared by
//! `--streams` loops (see [`crate::http2`]). Nothing here locks or
//! allocates per request.

use super::Prepared;
use super::exchange::WorkerCtx;
use crate::http1::{self, ResponseReader};
use crate::http2::Lane;
use crate::net::Stream;
use crate::request::Request;
use crate::response::{Capture, ResponseHead};
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use futures_util::FutureExt;
use std::task::Poll;
use tokio::io::AsyncWrite;
use tokio::time::Instant;

/// One request loop's way to the server, kept across requests and phases.
pub enum Driver {
    /// A connection of its own.
    H1(H1),
    /// A place on an HTTP/2 connection shared with other loops.
    H2(Lane),
    /// A place on an HTTP/3 connection shared with other loops.
    H3(crate::http3::Lane),
}

/// An HTTP/1.1 loop's connection, and the buffer its plan requests are
/// encoded into.
#[derive(Default)]
pub struct H1 {
    socket: Socket,
    /// A plan's request, encoded for each send (the run's own is encoded
    /// once, in [`super::Shared`]).
    scratch: Vec<u8>,
}

/// The connection itself, reused across requests and phases.
#[derive(Default)]
struct Socket {
    stream: Option<Stream>,
    reader: ResponseReader,
    /// Set while a request is on the wire; a connection left busy (its
    /// request was cancelled) is reconnected before reuse.
    busy: bool,
}

/// What a round sends.
pub enum Outgoing<'a> {
    /// `count` of the run's one request, encoded before the run; over
    /// HTTP/1.1 they go out pipelined in one write.
    Prepared { count: u32 },
    /// A plan's request, rendered for this send, and where its response's
    /// headers and body go; the driver encodes it for its protocol.
    Rendered {
        request: &'a Request<'a>,
        capture: &'a mut Capture,
    },
}

/// Requests of a round that got no response, and why.
#[derive(Debug)]
pub struct Lost {
    pub err: RequestError,
    pub count: u32,
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

impl Driver {
    /// The driver of the run's protocol for a new loop.
    pub(super) fn new(ctx: &WorkerCtx) -> Driver {
        match ctx.shared.prepared {
            Prepared::Http1(_) => {
                let mut h1 = H1::default();
                if ctx.connector.ring().is_some() {
                    h1.socket.reader = ResponseReader::with_capacity(http1::response::SMALL_BUFFER);
                }
                Driver::H1(h1)
            }
            Prepared::Http2(_) => Driver::H2(ctx.next_lane()),
            Prepared::Http3 { .. } => Driver::H3(ctx.next_h3_lane()),
        }
    }

    /// Sends a round and reads its responses, handing each response's head
    /// to `answered` in order, all before `deadline`; connects first when
    /// there is no usable connection. A connection that failed, that the
    /// server closes, or that keep-alive is off for is dropped. On an error
    /// returns how many requests of the round got no response (over HTTP/2
    /// a round is one request).
    pub(super) async fn round_trip(
        &mut self,
        ctx: &WorkerCtx,
        outgoing: Outgoing<'_>,
        deadline: Instant,
        mut answered: impl FnMut(ResponseHead),
    ) -> Result<(), Lost> {
        let lane = match self {
            Driver::H1(h1) => return h1.round_trip(ctx, outgoing, deadline, answered).await,
            Driver::H3(lane) => return h3_round_trip(ctx, lane, outgoing, deadline, answered).await,
            Driver::H2(lane) => lane,
        };
        let shared = &ctx.shared;
        let keepalive = shared.transport.keepalive;
        let exchange = async {
            match outgoing {
                Outgoing::Prepared { .. } => {
                    let Prepared::Http2(request) = &shared.prepared else {
                        unreachable!("an HTTP/2 lane runs only in an HTTP/2 run")
                    };
                    lane.round_trip(&ctx.connector, &ctx.recorder, request, None, keepalive)
                        .await
                }
                Outgoing::Rendered { request, capture } => {
                    lane.round_trip_rendered(&ctx.connector, &ctx.recorder, request, Some(capture), keepalive)
                        .await
                }
            }
        };
        match within(ctx, deadline, exchange).await {
            Ok(head) => {
                answered(head);
                Ok(())
            }
            Err(err) => Err(Lost { err, count: 1 }),
        }
    }

    /// Opens the loop's connection now if it has none (HTTP/2: its
    /// group's), instead of at its first request.
    pub(super) async fn connect(&mut self, ctx: &WorkerCtx) -> Result<(), RequestError> {
        match self {
            Driver::H1(h1) if h1.socket.stream.is_none() => {
                h1.socket.stream = Some(ctx.connector.connect(&ctx.recorder).await?);
                h1.socket.reader.clear();
                Ok(())
            }
            Driver::H1(_) => Ok(()),
            Driver::H2(lane) => lane.connect(&ctx.connector, &ctx.recorder).await,
            Driver::H3(lane) => lane.connect(ctx.dialer(), &ctx.recorder).await,
        }
    }

    /// Sends the next request on a new connection (a plan's
    /// `new_conn_per_iter`).
    pub(super) fn new_connection(&mut self) {
        match self {
            Driver::H1(h1) => h1.socket.stream = None,
            Driver::H2(lane) => lane.new_connection(),
            Driver::H3(lane) => lane.new_connection(),
        }
    }
}

/// [`Driver::round_trip`] over HTTP/3: one request on the lane's stream.
async fn h3_round_trip(
    ctx: &WorkerCtx,
    lane: &mut crate::http3::Lane,
    outgoing: Outgoing<'_>,
    deadline: Instant,
    mut answered: impl FnMut(ResponseHead),
) -> Result<(), Lost> {
    let keepalive = ctx.shared.transport.keepalive;
    let dialer = ctx.dialer();
    let exchange = async {
        match outgoing {
            Outgoing::Prepared { .. } => {
                let Prepared::Http3 { request, .. } = &ctx.shared.prepared else {
                    unreachable!("an HTTP/3 lane runs only in an HTTP/3 run")
                };
                lane.round_trip(dialer, &ctx.recorder, request, None, keepalive)
                    .await
            }
            Outgoing::Rendered { request, capture } => {
                lane.round_trip_rendered(dialer, &ctx.recorder, request, Some(capture), keepalive)
                    .await
            }
        }
    };
    match within(ctx, deadline, exchange).await {
        Ok(head) => {
            answered(head);
            Ok(())
        }
        Err(err) => Err(Lost { err, count: 1 }),
    }
}

impl H1 {
    /// [`Driver::round_trip`] over HTTP/1.1: one write of the round's
    /// requests, then their responses in order.
    async fn round_trip(
        &mut self,
        ctx: &WorkerCtx,
        outgoing: Outgoing<'_>,
        deadline: Instant,
        mut answered: impl FnMut(ResponseHead),
    ) -> Result<(), Lost> {
        let shared = &ctx.shared;
        let (bytes, first, count, is_head, mut capture) = match outgoing {
            Outgoing::Prepared { count } => {
                let Prepared::Http1(request) = &shared.prepared else {
                    unreachable!("an HTTP/1.1 connection runs only in an HTTP/1.1 run")
                };
                (
                    request.repeat_slice(count),
                    request.single,
                    count,
                    request.is_head,
                    None,
                )
            }
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
        };
        let socket = &mut self.socket;
        let send = socket.connect_and_write(ctx, bytes, first);
        let cut = match within(ctx, deadline, send).await {
            Ok(Written::All) => None,
            Ok(Written::Cut(write_err)) => Some(write_err),
            Err(err) => {
                socket.stream = None;
                return Err(Lost { err, count });
            }
        };
        for done in 0..count {
            let stream = socket.stream.as_mut().expect("connected by connect_and_write");
            let read = socket
                .reader
                .read_response_into(stream, &ctx.sink, is_head, capture.as_deref_mut());
            let head = match within(ctx, deadline, read).await {
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

/// The outcome of `work`, or a timeout once `deadline` has passed (the
/// request timeout, from the actual send). A plain function over
/// combinators rather than an `async fn`: an `async fn` would move `work`
/// into a state machine of its own, a copy per request that measured as
/// 2.5% of a run's CPU in `memmove`.
fn within<T>(
    ctx: &WorkerCtx,
    deadline: Instant,
    work: impl Future<Output = Result<T, RequestError>>,
) -> impl Future<Output = Result<T, RequestError>> {
    let timeout = ctx.shared.transport.timeout;
    tokio::time::timeout_at(deadline, work).map(move |done| {
        done.unwrap_or_else(|_| {
            Err(RequestError::new(
                ErrorKind::Timeout,
                ErrorDetail::Timeout(timeout),
            ))
        })
    })
}

impl Socket {
    /// Connects if there is no usable connection (none yet, or one left
    /// mid-request), marks it busy and writes `bytes` (whose first request
    /// is `first` bytes long), listening for an early answer while the
    /// socket is full.
    async fn connect_and_write(
        &mut self,
        ctx: &WorkerCtx,
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
