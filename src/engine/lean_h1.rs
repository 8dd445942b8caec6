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

use super::driver::Driver;
use super::exchange::{WorkerCtx, fail, record_response};
use super::feed::{ClosedFeed, Feed, Ticket, YIELD_EVERY};
use super::{Prepared, Shared};
use crate::http1::RequestBytes;
use crate::response::ResponseHead;
use crate::sample::RequestError;
use std::task::{Context, Poll};
use std::time::Instant;

/// What the run must be for its requests to take the fast path: the
/// closed model without a connection ramp, the run's own HTTP/1.1 request
/// (no plan) without pipelining, keep-alive, plain HTTP on the worker's
/// ring.
pub(super) fn applies(ctx: &WorkerCtx, feed: &Feed) -> bool {
    let unpipelined = matches!(feed, Feed::Closed(closed) if closed.pipeline == 1);
    unpipelined && settings_fit(&ctx.shared) && steady_on_a_ring(ctx, feed)
}

/// Whether a phase of `feed` is the closed model without a connection
/// ramp, on the worker's ring: every connection open from the start, each
/// with its next request as soon as its last is answered.
pub(super) fn steady_on_a_ring(ctx: &WorkerCtx, feed: &Feed) -> bool {
    matches!(feed, Feed::Closed(closed) if closed.ramp.is_none()) && ctx.connector.ring().is_some()
}

/// Whether the run's settings let its requests take the fast path (the
/// phase's feed and the worker's ring decide the rest).
pub(super) fn settings_fit(shared: &Shared) -> bool {
    !shared.open_model
        && shared.transport.pipeline == 1
        && shared.scenario.is_none()
        && matches!(shared.prepared, Prepared::Http1(_))
        && shared.transport.keepalive
        && shared.tls.is_none()
}

/// Why [`Rounds::poll`] handed control back to the loop.
pub(super) enum Exit {
    /// The phase's budget is spent.
    Dry,
    /// `YIELD_EVERY` requests went by: the runtime gets a turn.
    Yield,
    /// A ticket the fast path cannot send (see the module's doc); nothing
    /// of it was sent.
    General(Ticket),
    /// A ticket whose request went out but whose response is not one the
    /// fast path reads: the driver's general reader finishes it.
    Unfinished(Ticket),
}

/// The fast path's state between polls: the request on the wire, if any,
/// and the requests since the last yield.
pub(super) struct Rounds<'a> {
    ctx: &'a WorkerCtx,
    driver: &'a mut Driver,
    feed: &'a Feed,
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
    pub(super) fn new(ctx: &'a WorkerCtx, driver: &'a mut Driver, feed: &'a Feed) -> Rounds<'a> {
        let Prepared::Http1(request) = &ctx.shared.prepared else {
            unreachable!("the fast path runs only the run's HTTP/1.1 request")
        };
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
    pub(super) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Exit> {
        let Feed::Closed(closed) = self.feed else {
            unreachable!("the fast path runs only the closed model")
        };
        loop {
            let ticket = match self.in_flight {
                Some(ticket) => ticket,
                None => {
                    let ticket = match take_ticket(closed, &mut self.since_yield, &mut self.answered_at) {
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
pub(super) fn take_ticket(
    closed: &ClosedFeed,
    since_yield: &mut u32,
    answered_at: &mut Option<Instant>,
) -> Result<Ticket, Exit> {
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
pub(super) fn settle(
    ctx: &WorkerCtx,
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
pub(super) fn deadline(ctx: &WorkerCtx, ticket: Ticket) -> tokio::time::Instant {
    (ticket.intended + ctx.shared.transport.timeout).into()
}

/// Runs a loop's requests on the fast path until the phase's budget is
/// spent, handing each request it cannot take to the general path.
pub(super) async fn run(
    ctx: &WorkerCtx,
    driver: &mut Driver,
    feed: &Feed,
    mut general: impl AsyncFnMut(&mut Driver, Ticket),
) {
    let is_head = match &ctx.shared.prepared {
        Prepared::Http1(request) => request.is_head,
        _ => unreachable!("the fast path runs only the run's HTTP/1.1 request"),
    };
    loop {
        let exit = {
            let mut rounds = Rounds::new(ctx, driver, feed);
            std::future::poll_fn(|cx| rounds.poll(cx)).await
        };
        match exit {
            Exit::Dry => return,
            Exit::Yield => tokio::task::yield_now().await,
            Exit::General(ticket) => general(driver, ticket).await,
            Exit::Unfinished(ticket) => {
                let round = driver.finish_lean(ctx, is_head, deadline(ctx, ticket), |head| {
                    record_response(ctx, ticket, ticket.intended, head);
                });
                if let Err(lost) = round.await {
                    fail(ctx, &lost.err, ticket, ticket.intended, lost.count);
                }
            }
        }
    }
}
