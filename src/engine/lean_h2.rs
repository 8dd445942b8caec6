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

use super::Prepared;
use super::driver::Driver;
use super::exchange::WorkerCtx;
use super::feed::{Feed, Ticket};
use super::lean_h1::{Exit, deadline, settle, take_ticket};
use crate::http2::{H2Request, Started};
use std::task::{Context, Poll};
use std::time::Instant;

/// What the run must be for its requests to take the fast path: the
/// closed model without a connection ramp, the run's own HTTP/2 request
/// (no plan) on kept-alive connections. (HTTP/2 takes no `--pipeline`.)
pub(super) fn applies(ctx: &WorkerCtx, feed: &Feed) -> bool {
    let shared = &ctx.shared;
    matches!(feed, Feed::Closed(closed) if closed.ramp.is_none())
        && !shared.open_model
        && shared.scenario.is_none()
        && matches!(shared.prepared, Prepared::Http2(_))
        && shared.transport.keepalive
}

/// The fast path's state between polls: the stream in flight, if any, and
/// the requests since the last yield.
struct Streams<'a> {
    ctx: &'a WorkerCtx,
    driver: &'a mut Driver,
    feed: &'a Feed,
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
    fn new(ctx: &'a WorkerCtx, driver: &'a mut Driver, feed: &'a Feed) -> Streams<'a> {
        let Prepared::Http2(request) = &ctx.shared.prepared else {
            unreachable!("the HTTP/2 fast path runs only the run's HTTP/2 request")
        };
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
        let Feed::Closed(closed) = self.feed else {
            unreachable!("the fast path runs only the closed model")
        };
        loop {
            let (ticket, started) = match &mut self.in_flight {
                Some((ticket, started)) => (*ticket, started),
                None => {
                    let ticket = match take_ticket(closed, &mut self.since_yield, &mut self.answered_at) {
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
    ctx: &WorkerCtx,
    driver: &mut Driver,
    feed: &Feed,
    mut general: impl AsyncFnMut(&mut Driver, Ticket),
) {
    loop {
        let exit = {
            let mut streams = Streams::new(ctx, driver, feed);
            std::future::poll_fn(|cx| streams.poll(cx)).await
        };
        match exit {
            Exit::Dry => return,
            Exit::Yield => tokio::task::yield_now().await,
            Exit::General(ticket) => general(driver, ticket).await,
            Exit::Unfinished(_) => unreachable!("every stream's end is read on the fast path"),
        }
    }
}
