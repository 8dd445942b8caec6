//! The closed model's fast path over HTTP/2: the run's own request, one
//! stream at a time per lane on the group's open connection, started and
//! waited on by one small hand-written poll instead of the general loop's
//! nested futures.
//!
//! Why by hand, as over HTTP/1.1 (see [`super::lean_h1`]): the general
//! path (`send_prepared`, the driver's `round_trip`, the deadline's
//! wrapper, the lane's `round_trip` and its waits for room and for the
//! response) keeps a lane's state in nested async state machines, polled
//! through all their layers at each response. Here a stream's state is a
//! ticket, the connection's handle and a flag. Measured against nginx on
//! 2 cores, ten alternating rounds: 0.85x the user-space CPU per request
//! at 10 connections x 10 streams and 0.86x at 50 x 1 (valgrind: 6,486
//! instructions a request at 1 x 1 against 6,749).
//!
//! Anything out of the ordinary leaves the fast path for the one request it
//! concerns: no open connection that takes streams (the first request,
//! after a GOAWAY or a failure), no room for another stream, a stream the
//! server refused. Timeouts, the recording and the yield every few requests
//! are those of the general loop.

use super::Shared;
use super::driver::Driver;
use super::exchange::WorkerCtx;
use super::feed::{ClosedFeed, Feed, Ticket};
use super::lean_h1::{Exit, deadline, settle, take_ticket};
use super::multiplexed::H2;
use crate::http2::{H2Request, StartAtOnce, Started};
use crate::response::ResponseHead;
use crate::sample::RequestError;
use std::task::{Context, Poll};
use std::time::Instant;

/// What the run must be for its requests to take the fast path: the
/// closed model without a connection ramp, the run's own HTTP/2 request
/// (no plan) on kept-alive connections. (HTTP/2 takes no `--pipeline`.)
/// Where it is, the phase's closed feed and the run's request, which the
/// fast path sends.
pub(super) fn applies<'a>(ctx: &'a WorkerCtx<H2>, feed: &'a Feed) -> Option<(&'a ClosedFeed, &'a H2Request)> {
    let Feed::Closed(closed) = feed else {
        return None;
    };
    let shared = &ctx.shared;
    let request = shared.workload.fixed()?;
    let fits = closed.ramp.is_none() && !shared.model.is_open() && shared.transport.keepalive;
    fits.then_some((closed, request))
}

/// Whether the run is plain HTTP/2 of the run's own request in the closed
/// model, each connection's responses read only by its stamped socket
/// (which lets the worker's ring wait for batches of completions).
pub(super) fn reads_stamped_sockets(shared: &Shared<H2>) -> bool {
    !shared.model.is_open()
        && shared.workload.fixed().is_some()
        && shared.transport.keepalive
        && !shared.transport.coalesce
        && shared.tls.is_none()
}

/// The fast path's state between polls: the stream in flight, if any, and
/// the requests since the last yield.
struct Streams<'a> {
    ctx: &'a WorkerCtx<H2>,
    driver: &'a mut Driver<H2>,
    feed: &'a ClosedFeed,
    request: &'a H2Request,
    /// Dropped with the fast path (the run's end) while it runs, the
    /// stream is cancelled on the server.
    in_flight: Option<(Ticket, Started)>,
    /// Whether the stream in flight has waited for its end before.
    waited: bool,
    /// When the last response was read, if the next stream starts in the
    /// same poll: the clock read for one is the other's send time.
    answered_at: Option<Instant>,
    since_yield: u32,
}

impl<'a> Streams<'a> {
    fn new(
        ctx: &'a WorkerCtx<H2>,
        driver: &'a mut Driver<H2>,
        feed: &'a ClosedFeed,
        request: &'a H2Request,
    ) -> Streams<'a> {
        driver.resume();
        Streams {
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

    /// Starts, waits on and records streams until one needs the general
    /// path, the budget is spent or it is time to yield.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Exit> {
        loop {
            let (ticket, started) = match &mut self.in_flight {
                Some((ticket, started)) => (*ticket, started),
                None => {
                    let ticket = match take_ticket(self.feed, &mut self.since_yield, &mut self.answered_at) {
                        Ok(ticket) => ticket,
                        Err(exit) => return Poll::Ready(exit),
                    };
                    let due = deadline(self.ctx, ticket);
                    let sent_at = ticket.intended.into();
                    let Some(started) = self.driver.lean_stream(self.request, sent_at, due, cx) else {
                        return Poll::Ready(Exit::General(ticket));
                    };
                    self.since_yield += 1;
                    self.waited = false;
                    let (_, started) = self.in_flight.insert((ticket, started));
                    (ticket, started)
                }
            };
            let due = deadline(self.ctx, ticket);
            let body = &self.request.body;
            let end = self
                .driver
                .poll_lean_stream(self.ctx, started, body, cx, due, &mut self.waited);
            let Poll::Ready(end) = end else {
                return Poll::Pending;
            };
            // A stream still running (a timeout) is cancelled here.
            self.in_flight = None;
            // A refused stream was never processed: the general path sends
            // it again on another connection.
            if let Some(refused) = settle(self.ctx, ticket, end, &mut self.answered_at) {
                return Poll::Ready(Exit::General(refused));
            }
        }
    }
}

/// Runs a lane's requests on the fast path until the phase's budget is
/// spent, handing each request it cannot take to the general path.
pub(super) async fn run(
    ctx: &WorkerCtx<H2>,
    driver: &mut Driver<H2>,
    feed: &ClosedFeed,
    request: &H2Request,
    mut general: impl AsyncFnMut(&mut Driver<H2>, Ticket),
) {
    loop {
        let exit = {
            let mut streams = Streams::new(ctx, driver, feed, request);
            std::future::poll_fn(|cx| streams.poll(cx)).await
        };
        match exit {
            Exit::Dry => return,
            Exit::Yield => tokio::task::yield_now().await,
            Exit::General(ticket) => general(driver, ticket).await,
            Exit::Unfinished(never) => match never {},
        }
    }
}

/// The fast path's steps on the lane's connection: the run's own request
/// started and its stream waited on by plain polls, with the loop's
/// deadline as in the general round trip.
impl Driver<H2> {
    /// Starts the run's own `request` at `now` with `deadline` when the
    /// lane's connection is open and has room for the stream (see
    /// [`StartAtOnce::start_at_once`]); otherwise `None`, with nothing sent.
    fn lean_stream(
        &mut self,
        request: &H2Request,
        now: tokio::time::Instant,
        deadline: tokio::time::Instant,
        cx: &mut Context<'_>,
    ) -> Option<Started> {
        let started = self.way.start_at_once(request, cx)?;
        // As over HTTP/1.1: an armed timer is moved on only when it fires.
        self.timer.arm_lazily(now, deadline);
        Some(started)
    }

    /// The end of what [`Self::lean_stream`] started: its response head,
    /// `Ok(None)` when the server refused the stream (the general path
    /// sends it again), or its error; a timeout once `deadline` has passed,
    /// after which dropping `started` cancels the stream. `waited` is as in
    /// [`super::deadline::LoopTimer::poll_expired`].
    fn poll_lean_stream(
        &mut self,
        ctx: &WorkerCtx<H2>,
        started: &mut Started,
        body: &[u8],
        cx: &mut Context<'_>,
        deadline: tokio::time::Instant,
        waited: &mut bool,
    ) -> Poll<Result<Option<ResponseHead>, RequestError>> {
        match started.poll_end(body, cx) {
            Poll::Pending => {
                let timeout = ctx.shared.transport.timeout;
                self.timer.poll_expired(cx, deadline, timeout, waited).map(Err)
            }
            end => end,
        }
    }
}
