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
use crate::http1::{self, RequestBytes, ResponseReader};
use crate::http2::{H2Request, Lane, Started};
use crate::net::Stream;
use crate::request::Request;
use crate::response::{Capture, ResponseHead};
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::AsyncWrite;
use tokio::time::{Instant, Sleep};

/// One request loop's way to the server, and the timer that bounds its
/// requests, kept across requests and phases.
pub struct Driver {
    way: Way,
    /// The request timeout: one timer for all the loop's requests. Each
    /// request moves its deadline later, which in tokio's timer wheel is
    /// only a number changed (the entry is moved when the old deadline
    /// comes up); a timer per request was put into the wheel and taken out
    /// again every time.
    timeout: Pin<Box<Sleep>>,
    /// Where `timeout` is set. The fast path sets the timer only once its
    /// deadline has passed (the timer never fires before it, so until then
    /// it is known to be armed, and no later than the request's own
    /// deadline), and keeps this copy so that a request need not touch the
    /// timer at all: at thousands of connections the timer is one more
    /// cold cache line, and moving it in tokio's wheel per request cost
    /// more than anything else left in the fast path.
    armed_until: Instant,
    /// Whether the timer has been polled by this loop's task since it was
    /// last set, so it wakes the loop when it fires (the fast path).
    registered: bool,
}

/// How a loop reaches the server.
enum Way {
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
        let way = match ctx.shared.prepared {
            Prepared::Http1(_) => {
                let mut h1 = H1::default();
                if ctx.connector.ring().is_some() {
                    h1.socket.reader = ResponseReader::with_capacity(http1::response::SMALL_BUFFER);
                }
                Way::H1(h1)
            }
            Prepared::Http2(_) => Way::H2(ctx.next_lane()),
            Prepared::Http3 { .. } => Way::H3(ctx.next_h3_lane()),
        };
        let now = Instant::now();
        Driver {
            way,
            // Set to each request's deadline before it is waited on.
            timeout: Box::pin(tokio::time::sleep_until(now)),
            armed_until: now,
            registered: false,
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
        let (mut timer, way) = self.timer_and_way(deadline, ctx);
        let lane = match way {
            Way::H1(h1) => return h1.round_trip(ctx, outgoing, timer, answered).await,
            Way::H3(lane) => return h3_round_trip(ctx, lane, outgoing, timer, answered).await,
            Way::H2(lane) => lane,
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
        match timer.within(exchange).await {
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
        match &mut self.way {
            Way::H1(h1) if h1.socket.stream.is_none() => {
                h1.socket.stream = Some(ctx.connector.connect(&ctx.recorder).await?);
                h1.socket.reader.clear();
                Ok(())
            }
            Way::H1(_) => Ok(()),
            Way::H2(lane) => lane.connect(&ctx.connector, &ctx.recorder).await,
            Way::H3(lane) => lane.connect(ctx.dialer(), &ctx.recorder).await,
        }
    }

    /// Sends the next request on a new connection (a plan's
    /// `new_conn_per_iter`).
    pub(super) fn new_connection(&mut self) {
        match &mut self.way {
            Way::H1(h1) => h1.socket.stream = None,
            Way::H2(lane) => lane.new_connection(),
            Way::H3(lane) => lane.new_connection(),
        }
    }
}

/// The HTTP/1.1 fast path's steps (see [`super::lean_h1`]): the run's own
/// request queued and its response read by plain polls, with the loop's
/// deadline and connection handling as in [`Driver::round_trip`].
impl Driver {
    /// Sends one `request` (kept, or queued) at `now` with `deadline`, on
    /// the loop's connection when it is open, idle, plain on the worker's
    /// ring and its send queue has room; otherwise `false`, with nothing
    /// sent.
    pub(super) fn lean_send(&mut self, request: &RequestBytes, now: Instant, deadline: Instant) -> bool {
        let Way::H1(h1) = &mut self.way else {
            return false;
        };
        let socket = &mut h1.socket;
        if socket.busy {
            return false;
        }
        let Some(ring) = socket.stream.as_mut().and_then(Stream::ring_socket) else {
            return false;
        };
        // From the run's own bytes, with no completion to reap: a loop on
        // the fast path sends its next request only once this one is
        // answered.
        if !ring.send_kept(&request.bytes, request.single) && !ring.queue_whole(request.repeat_slice(1)) {
            return false;
        }
        socket.busy = true;
        // Until `armed_until` the timer is armed, for an earlier request's
        // deadline; when it fires, `poll_lean_answer` moves it on to this
        // one's. Past it, it is set again now.
        if now >= self.armed_until {
            self.set_timer(deadline);
        }
        true
    }

    /// The loop's timer for a request due by `deadline`, and its way to
    /// the server. The timer is set again only when it has fired or is
    /// set later than `deadline`: otherwise it fires no later than
    /// `deadline` and is moved on to it then (see [`poll_lazy_timer`]), so
    /// most requests leave tokio's timer wheel alone.
    fn timer_and_way(&mut self, deadline: Instant, ctx: &WorkerCtx) -> (Timer<'_>, &mut Way) {
        if deadline < self.armed_until || self.timeout.is_elapsed() {
            self.set_timer(deadline);
        }
        let timer = Timer {
            sleep: self.timeout.as_mut(),
            // Armed, not fired and polled by this loop's task, which it
            // will wake: the request's first wait need not look at it.
            quiet: self.registered,
            armed_until: &mut self.armed_until,
            registered: &mut self.registered,
            deadline,
            timeout: ctx.shared.transport.timeout,
        };
        (timer, &mut self.way)
    }

    /// Sets the loop's timer to `deadline`, noting that no task has polled
    /// it since.
    fn set_timer(&mut self, deadline: Instant) {
        self.timeout.as_mut().reset(deadline);
        self.armed_until = deadline;
        self.registered = false;
    }

    /// A new task polls the loop (a new phase, or after a yield): the
    /// timer must be polled once by it to wake it.
    pub(super) fn resume(&mut self) {
        self.registered = false;
    }

    /// The response to what [`Self::lean_send`] queued: `Ready(Ok(None))`
    /// when it is not one [`ResponseReader::poll_whole_response`] reads,
    /// for [`Self::finish_lean`] to read instead. A connection that failed,
    /// timed out or is closed by the server is dropped. `waited` is as in
    /// [`Self::poll_lean_deadline`].
    pub(super) fn poll_lean_answer(
        &mut self,
        ctx: &WorkerCtx,
        cx: &mut Context<'_>,
        is_head: bool,
        deadline: Instant,
        waited: &mut bool,
    ) -> Poll<Result<Option<ResponseHead>, RequestError>> {
        let Way::H1(h1) = &mut self.way else {
            unreachable!("lean_send queued on an HTTP/1.1 connection")
        };
        let socket = &mut h1.socket;
        let stream = socket.stream.as_mut().expect("open since lean_send");
        let known = ctx.known_head();
        // Read where the kernel put it when it came whole in the ring's
        // buffer: no copy into the connection's own.
        let reader = &socket.reader;
        let mut ring = stream.ring_socket();
        let in_place = ring.as_mut().and_then(|ring| {
            ring.take_in_place(
                |bytes| match reader.whole_response_in_place(bytes, is_head, known) {
                    Some(head) => (head.bytes as usize, Some(head)),
                    None => (0, None),
                },
            )
        });
        let read = match in_place {
            Some(Some(head)) => Poll::Ready(Ok(Some(head))),
            // Nothing has come, and no part of a response before: wait with
            // no read (so it always is right after a request is queued, as
            // it goes out only at the end of the turn).
            None if reader.holds_nothing() && ring.is_some_and(|ring| ring.nothing_received(cx)) => {
                Poll::Pending
            }
            _ => socket.reader.poll_whole_response(stream, cx, is_head, known),
        };
        let Poll::Ready(mut read) = read else {
            let err = ready!(self.poll_lean_deadline(ctx, cx, deadline, waited));
            if let Way::H1(h1) = &mut self.way {
                h1.socket.stream = None;
            }
            return Poll::Ready(Err(err));
        };
        if let Ok(Some(head)) = &mut read {
            head.received_at = socket.stream.as_ref().and_then(Stream::received_at);
        }
        match &read {
            Ok(Some(head)) if !head.close => socket.busy = false,
            Ok(None) => {}
            _ => socket.stream = None,
        }
        Poll::Ready(read)
    }

    /// For a fast-path request not yet answered: the timeout's error once
    /// `deadline` has passed.
    ///
    /// `waited` says whether this request has waited before: the first
    /// time, right after it was sent, a timer this task registered is known
    /// to be armed and is left alone; after that, something woke the loop,
    /// perhaps the timer, and it is looked at.
    fn poll_lean_deadline(
        &mut self,
        ctx: &WorkerCtx,
        cx: &mut Context<'_>,
        deadline: Instant,
        waited: &mut bool,
    ) -> Poll<RequestError> {
        let first = !*waited;
        *waited = true;
        if first && self.registered {
            return Poll::Pending;
        }
        let timer = self.timeout.as_mut();
        ready!(poll_lazy_timer(
            timer,
            &mut self.armed_until,
            &mut self.registered,
            deadline,
            cx
        ));
        Poll::Ready(timed_out(ctx.shared.transport.timeout))
    }

    /// Reads, the general way, the response [`Self::poll_lean_answer`]
    /// left, by the deadline [`Self::lean_send`] set.
    pub(super) async fn finish_lean(
        &mut self,
        ctx: &WorkerCtx,
        is_head: bool,
        deadline: Instant,
        answered: impl FnMut(ResponseHead),
    ) -> Result<(), Lost> {
        let (timer, way) = self.timer_and_way(deadline, ctx);
        let Way::H1(h1) = way else {
            unreachable!("lean_send queued on an HTTP/1.1 connection")
        };
        h1.read_round(ctx, timer, 1, is_head, None, None, answered).await
    }
}

/// The HTTP/2 fast path's steps (see [`super::lean_h2`]): the run's own
/// request started on the lane's connection and its stream waited on by
/// plain polls, with the loop's deadline as in [`Driver::round_trip`].
impl Driver {
    /// Starts the run's own `request` at `now` with `deadline` when the
    /// lane's connection is open and has room for the stream (see
    /// [`Lane::start_at_once`]); otherwise `None`, with nothing sent.
    pub(super) fn lean_stream(
        &mut self,
        request: &H2Request,
        now: Instant,
        deadline: Instant,
        cx: &mut Context<'_>,
    ) -> Option<Started> {
        let Way::H2(lane) = &self.way else {
            return None;
        };
        let started = lane.start_at_once(request, cx)?;
        // As in `lean_send`: an armed timer is moved on only when it fires.
        if now >= self.armed_until {
            self.set_timer(deadline);
        }
        Some(started)
    }

    /// The end of what [`Self::lean_stream`] started: its response head,
    /// `Ok(None)` when the server refused the stream (the general path
    /// sends it again), or its error; a timeout once `deadline` has passed,
    /// after which dropping `started` cancels the stream. `waited` is as in
    /// [`Self::poll_lean_deadline`].
    pub(super) fn poll_lean_stream(
        &mut self,
        ctx: &WorkerCtx,
        started: &mut Started,
        body: &[u8],
        cx: &mut Context<'_>,
        deadline: Instant,
        waited: &mut bool,
    ) -> Poll<Result<Option<ResponseHead>, RequestError>> {
        match started.poll_end(body, cx) {
            Poll::Pending => self.poll_lean_deadline(ctx, cx, deadline, waited).map(Err),
            end => end,
        }
    }
}

/// Polls a timer set to `*armed_until`, at or before `deadline`: `Ready`
/// once `deadline` has passed. A timer that fired for an earlier deadline
/// is set to this one and polled again, to wake the task then. Either way
/// this task has now polled it (`registered`).
fn poll_lazy_timer(
    mut timer: Pin<&mut Sleep>,
    armed_until: &mut Instant,
    registered: &mut bool,
    deadline: Instant,
    cx: &mut Context<'_>,
) -> Poll<()> {
    *registered = true;
    loop {
        ready!(timer.as_mut().poll(cx));
        if *armed_until >= deadline || Instant::now() >= deadline {
            return Poll::Ready(());
        }
        timer.as_mut().reset(deadline);
        *armed_until = deadline;
    }
}

/// [`Driver::round_trip`] over HTTP/3: one request on the lane's stream.
async fn h3_round_trip(
    ctx: &WorkerCtx,
    lane: &mut crate::http3::Lane,
    outgoing: Outgoing<'_>,
    mut timer: Timer<'_>,
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
    match timer.within(exchange).await {
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
        mut timer: Timer<'_>,
        answered: impl FnMut(ResponseHead),
    ) -> Result<(), Lost> {
        let shared = &ctx.shared;
        let (bytes, first, count, is_head, capture) = match outgoing {
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
    async fn read_round(
        &mut self,
        ctx: &WorkerCtx,
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
                ctx.known_head(),
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

/// A loop's timer set to one request's deadline (the request timeout, from
/// the actual send), for each step of the request to be bounded by.
struct Timer<'t> {
    /// Set to `*armed_until`, at or before `deadline`.
    sleep: Pin<&'t mut Sleep>,
    armed_until: &'t mut Instant,
    /// Whether this loop's task has polled `sleep` since it was last set.
    registered: &'t mut bool,
    deadline: Instant,
    /// The timer has not fired and will wake this task: the first wait
    /// skips polling it.
    quiet: bool,
    /// The run's request timeout, which the error names.
    timeout: Duration,
}

impl<'t> Timer<'t> {
    /// The outcome of `work`, or a timeout once the deadline has passed.
    fn within<T, F: Future<Output = Result<T, RequestError>>>(&mut self, work: F) -> Within<'_, 't, F> {
        Within { work, timer: self }
    }

    /// `Ready` once the deadline has passed; until then, this task is
    /// woken when it does.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::take(&mut self.quiet) {
            return Poll::Pending;
        }
        poll_lazy_timer(
            self.sleep.as_mut(),
            self.armed_until,
            self.registered,
            self.deadline,
            cx,
        )
    }
}

pin_project_lite::pin_project! {
    /// [`Timer::within`]'s future. A struct rather than an `async fn`: an
    /// `async fn` would move `work` into a state machine of its own, a copy
    /// per request that measured as 2.5% of a run's CPU in `memmove`.
    struct Within<'a, 't, F> {
        #[pin]
        work: F,
        timer: &'a mut Timer<'t>,
    }
}

impl<T, F: Future<Output = Result<T, RequestError>>> Future for Within<'_, '_, F> {
    type Output = Result<T, RequestError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // The work first, as tokio's own timeout does: a response that is
        // in counts even when the deadline has just passed.
        if let Poll::Ready(done) = this.work.poll(cx) {
            return Poll::Ready(done);
        }
        match this.timer.poll_expired(cx) {
            Poll::Ready(()) => Poll::Ready(Err(timed_out(this.timer.timeout))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// What a request that ran out of `timeout` failed with.
fn timed_out(timeout: Duration) -> RequestError {
    RequestError::new(ErrorKind::Timeout, ErrorDetail::Timeout(timeout))
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
