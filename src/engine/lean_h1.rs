//! The closed model's fast path: the run's own HTTP/1.1 request, one at a
//! time on a kept-alive connection the worker's ring drives, sent and read
//! by one small hand-written poll instead of the general loop's nested
//! futures.
//!
//! Why by hand: the general path (`send_prepared`, the driver's
//! `round_trip`, the deadline's wrapper, the reader's `read_head` and
//! `fill`) keeps one connection's state in nested async state machines
//! spread over some 2.7 kB. At thousands of connections each request found
//! most of those cache lines cold: `perf` put about 9% of the CPU at 4,000
//! connections on loads of that state, more than parsing the response.
//! Here a request's state is a ticket and a flag, next to the driver's
//! connection and reader.
//!
//! Anything out of the ordinary leaves the fast path for the one request it
//! concerns: a connection to open (first request, after a close or a
//! failure), a send queue without room, a response that is not a final one
//! with a body of known length fitting the reader's buffer. Timeouts, the
//! recording and the yield every few requests are those of the general
//! loop.

use super::Shared;
use super::driver::Driver;
use super::exchange::{Wire, WorkerCtx, fail, record_response};
use super::feed::{ClosedFeed, Feed, Ticket, YIELD_EVERY};
use super::h1::H1;
use crate::http1::RequestBytes;
use crate::net::Stream;
use crate::response::ResponseHead;
use crate::sample::RequestError;
use std::convert::Infallible;
use std::task::{Context, Poll, ready};
use std::time::Instant;

/// What the run must be for its requests to take the fast path: the
/// closed model without a connection ramp, the run's own HTTP/1.1 request
/// (no plan) without pipelining, keep-alive, plain HTTP on the worker's
/// ring. Where it is, the phase's closed feed and the run's request, which
/// the fast path sends.
pub(super) fn applies<'a>(
    ctx: &'a WorkerCtx<H1>,
    feed: &'a Feed,
) -> Option<(&'a ClosedFeed, &'a RequestBytes)> {
    let Feed::Closed(closed) = feed else {
        return None;
    };
    let request = ctx.shared.workload.fixed()?;
    let fits = closed.pipeline == 1 && settings_fit(&ctx.shared) && steady_on_a_ring(ctx, feed);
    fits.then_some((closed, request))
}

/// Whether a phase of `feed` is the closed model without a connection
/// ramp, on the worker's ring: every connection open from the start, each
/// with its next request as soon as its last is answered.
pub(super) fn steady_on_a_ring<W: Wire>(ctx: &WorkerCtx<W>, feed: &Feed) -> bool {
    matches!(feed, Feed::Closed(closed) if closed.ramp.is_none()) && ctx.connector.ring().is_some()
}

/// Whether the run's settings let its requests take the fast path (the
/// phase's feed and the worker's ring decide the rest).
pub(super) fn settings_fit(shared: &Shared<H1>) -> bool {
    !shared.model.is_open()
        && shared.transport.pipeline == 1
        && shared.workload.fixed().is_some()
        && shared.transport.keepalive
        && shared.tls.is_none()
}

/// Why a fast path's poll handed control back to the loop; `U` is what a
/// request left unfinished carries, where a fast path leaves any.
pub(super) enum Exit<U = Infallible> {
    /// The phase's budget is spent.
    Dry,
    /// `YIELD_EVERY` requests went by: the runtime gets a turn.
    Yield,
    /// A ticket the fast path cannot send (see the module's doc); nothing
    /// of it was sent.
    General(Ticket),
    /// A request that went out but whose response is not one the fast
    /// path reads: the connection's general reader finishes it.
    Unfinished(U),
}

/// The fast path's state between polls: the request on the wire, if any,
/// and the requests since the last yield.
struct Rounds<'a> {
    ctx: &'a WorkerCtx<H1>,
    driver: &'a mut Driver<H1>,
    feed: &'a ClosedFeed,
    request: &'a RequestBytes,
    in_flight: Option<Ticket>,
    /// Whether the request in flight has waited for its answer before.
    waited: bool,
    /// When the last answer was read, if the next request goes out in the
    /// same poll: the clock read for one is the other's send time.
    answered_at: Option<Instant>,
    since_yield: u32,
}

impl<'a> Rounds<'a> {
    fn new(
        ctx: &'a WorkerCtx<H1>,
        driver: &'a mut Driver<H1>,
        feed: &'a ClosedFeed,
        request: &'a RequestBytes,
    ) -> Rounds<'a> {
        driver.resume();
        Rounds {
            ctx,
            driver,
            feed,
            request,
            in_flight: None,
            waited: false,
            answered_at: None,
            since_yield: 0,
        }
    }

    /// Sends, reads and records requests until one needs the general path,
    /// the budget is spent or it is time to yield.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Exit<Ticket>> {
        loop {
            let ticket = match self.in_flight {
                Some(ticket) => ticket,
                None => {
                    let ticket = match take_ticket(self.feed, &mut self.since_yield, &mut self.answered_at) {
                        Ok(ticket) => ticket,
                        Err(exit) => return Poll::Ready(exit),
                    };
                    let intended = ticket.intended;
                    if !self
                        .driver
                        .lean_send(self.request, intended.into(), deadline(self.ctx, ticket))
                    {
                        return Poll::Ready(Exit::General(ticket));
                    }
                    self.since_yield += 1;
                    self.in_flight = Some(ticket);
                    self.waited = false;
                    ticket
                }
            };
            let is_head = self.request.is_head;
            let due = deadline(self.ctx, ticket);
            let answer = self
                .driver
                .poll_lean_answer(self.ctx, cx, is_head, due, &mut self.waited);
            let Poll::Ready(answer) = answer else {
                return Poll::Pending;
            };
            self.in_flight = None;
            if let Some(ticket) = settle(self.ctx, ticket, answer, &mut self.answered_at) {
                return Poll::Ready(Exit::Unfinished(ticket));
            }
        }
    }
}

/// The next ticket of a fast path's loop, which has sent `since_yield`
/// requests since it last yielded: an [`Exit`] instead when it is time to
/// yield or the budget is spent.
///
/// The closed model's ticket is taken at the moment of sending: it is the
/// send time too. Right after an answer (`answered_at`) that moment is
/// when the answer was read (the request goes out with the turn's other
/// sends, later than either).
pub(super) fn take_ticket<U>(
    closed: &ClosedFeed,
    since_yield: &mut u32,
    answered_at: &mut Option<Instant>,
) -> Result<Ticket, Exit<U>> {
    if *since_yield >= YIELD_EVERY {
        *since_yield = 0;
        return Err(Exit::Yield);
    }
    let (intended, count) = closed
        .budget
        .take_batch_at(1, answered_at.take())
        .ok_or(Exit::Dry)?;
    Ok(Ticket {
        intended,
        count,
        queued: false,
    })
}

/// Records how a fast path's request ended: its response (read at
/// `answered_at`, the next request's send time) or its error. A request
/// that ended with no response read, `Ok(None)`, is handed back: it needs
/// the general path.
pub(super) fn settle<W: Wire>(
    ctx: &WorkerCtx<W>,
    ticket: Ticket,
    end: Result<Option<ResponseHead>, RequestError>,
    answered_at: &mut Option<Instant>,
) -> Option<Ticket> {
    match end {
        Ok(Some(head)) => *answered_at = Some(record_response(ctx, ticket, ticket.intended, head)),
        Ok(None) => return Some(ticket),
        Err(err) => fail(ctx, &err, ticket, ticket.intended, 1),
    }
    None
}

/// A request's deadline: the request timeout from its send.
pub(super) fn deadline<W: Wire>(ctx: &WorkerCtx<W>, ticket: Ticket) -> tokio::time::Instant {
    (ticket.intended + ctx.shared.transport.timeout).into()
}

/// Runs a loop's requests on the fast path until the phase's budget is
/// spent, handing each request it cannot take to the general path.
pub(super) async fn run(
    ctx: &WorkerCtx<H1>,
    driver: &mut Driver<H1>,
    feed: &ClosedFeed,
    request: &RequestBytes,
    mut general: impl AsyncFnMut(&mut Driver<H1>, Ticket),
) {
    loop {
        let exit = {
            let mut rounds = Rounds::new(ctx, driver, feed, request);
            std::future::poll_fn(|cx| rounds.poll(cx)).await
        };
        match exit {
            Exit::Dry => return,
            Exit::Yield => tokio::task::yield_now().await,
            Exit::General(ticket) => general(driver, ticket).await,
            Exit::Unfinished(ticket) => {
                let round = driver.finish_lean(ctx, request.is_head, deadline(ctx, ticket), |head| {
                    record_response(ctx, ticket, ticket.intended, head);
                });
                if let Err(lost) = round.await {
                    fail(ctx, &lost.err, ticket, ticket.intended, lost.count);
                }
            }
        }
    }
}

/// The fast path's steps on the loop's connection: the run's own request
/// queued and its response read by plain polls, with the loop's deadline
/// and connection handling as in the general round trip.
impl Driver<H1> {
    /// Sends one `request` (kept, or queued) at `now` with `deadline`, on
    /// the loop's connection when it is open, idle, plain on the worker's
    /// ring and its send queue has room; otherwise `false`, with nothing
    /// sent.
    fn lean_send(
        &mut self,
        request: &RequestBytes,
        now: tokio::time::Instant,
        deadline: tokio::time::Instant,
    ) -> bool {
        let socket = &mut self.way.socket;
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
        self.timer.arm_lazily(now, deadline);
        true
    }

    /// The response to what [`Self::lean_send`] queued: `Ready(Ok(None))`
    /// when it is not one the reader's `poll_whole_response` reads, for
    /// [`Self::finish_lean`] to read instead. A connection that failed,
    /// timed out or is closed by the server is dropped. `waited` is as in
    /// [`super::deadline::LoopTimer::poll_expired`].
    fn poll_lean_answer(
        &mut self,
        ctx: &WorkerCtx<H1>,
        cx: &mut Context<'_>,
        is_head: bool,
        deadline: tokio::time::Instant,
        waited: &mut bool,
    ) -> Poll<Result<Option<ResponseHead>, RequestError>> {
        let socket = &mut self.way.socket;
        let stream = socket.stream.as_mut().expect("open since lean_send");
        let known = &ctx.lanes;
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
            let timeout = ctx.shared.transport.timeout;
            let err = ready!(self.timer.poll_expired(cx, deadline, timeout, waited));
            self.way.socket.stream = None;
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

    /// Reads, the general way, the response [`Self::poll_lean_answer`]
    /// left, by the deadline [`Self::lean_send`] set.
    async fn finish_lean(
        &mut self,
        ctx: &WorkerCtx<H1>,
        is_head: bool,
        deadline: tokio::time::Instant,
        answered: impl FnMut(ResponseHead),
    ) -> Result<(), super::exchange::Lost> {
        let timer = self.timer.for_request(deadline, ctx.shared.transport.timeout);
        self.way
            .read_round(ctx, timer, 1, is_head, None, None, answered)
            .await
    }
}
