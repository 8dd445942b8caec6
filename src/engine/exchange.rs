//! The seam between the request loop and the protocols: the [`Wire`]
//! every protocol implements, the worker's context that the loops and the
//! protocol borrow ([`WorkerCtx`]), what a round sends ([`Outgoing`]) and
//! how an answer or a failure is recorded (`classify`).
//!
//! The loop, the fast paths and the pacer are written once, generic over a
//! [`Wire`]; a run picks its protocol once, before its workers start, so
//! that nothing on the request path asks which protocol it speaks. A new
//! protocol, or a new kind of exchange on one, is one more implementation.
//!
//! Latency runs from the ticket's intended time; the service time from the
//! actual send. Nothing here locks or allocates per request: the recorder
//! is this thread's own.

use super::deadline::Timer;
use super::feed::Ticket;
use super::protocol::Settled;
use super::{EngineError, Shared};
use crate::net::Connector;
use crate::net::uring::Ring;
use crate::plan::Transport;
use crate::recorder::Recorder;
use crate::request::{Fields, Request};
use crate::response::{BodySink, Capture, ResponseHead};
use crate::sample::{ErrorDetail, ErrorKind, Outcome, RequestError, Sample};
use crate::script::RequestText;
use crate::target::Target;
use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Context;
use std::time::Instant;

/// One protocol, as the request loop drives it: how the run's request is
/// encoded, what a worker's loops share, one loop's way to the server and
/// its round trip.
///
/// The futures run on one worker's current-thread runtime and are never
/// sent to another thread, so they carry no `Send` bound.
#[allow(async_fn_in_trait)]
pub trait Wire: Sized + 'static {
    /// The run's own request as the protocol sends it, encoded once before
    /// the run.
    type Request: Send + Sync + 'static;
    /// What the protocol needs for the whole run besides its request,
    /// shared read-only by the workers.
    type Setup: Send + Sync + 'static;
    /// What a worker's loops share.
    type Lanes;
    /// One loop's way to the server: a connection of its own, or a place on
    /// one shared with other loops.
    type Way;

    /// The run's request, encoded for this protocol.
    fn encode(request: &Request<'_>, transport: &Transport) -> Result<Self::Request, EngineError>;
    /// The run-wide setup, from the protocol settled on.
    fn setup(settled: &Settled) -> Result<Self::Setup, EngineError>;
    /// What a worker's loops share, made once per worker (with its ring,
    /// when its sockets are driven by io_uring).
    fn lanes(shared: &Shared<Self>, ring: Option<&Rc<Ring>>) -> Self::Lanes;
    /// A new loop's way to the server.
    fn way(ctx: &WorkerCtx<Self>) -> Self::Way;
    /// Opens the way's connection now if it has none, instead of at its
    /// first request.
    async fn connect(way: &mut Self::Way, ctx: &WorkerCtx<Self>) -> Result<(), RequestError>;
    /// Sends the next request on a new connection.
    fn new_connection(way: &mut Self::Way);
    /// Sends a round and reads its responses, handing each response's
    /// head to `answered` in order, each step bounded by `timer`; connects
    /// first when there is no usable connection. A connection that failed,
    /// that the server closes, or that keep-alive is off for is dropped.
    /// On an error, returns how many requests of the round got no response.
    async fn round_trip(
        way: &mut Self::Way,
        ctx: &WorkerCtx<Self>,
        outgoing: Outgoing<'_, Self::Request>,
        timer: Timer<'_>,
        answered: impl FnMut(ResponseHead),
    ) -> Result<(), Lost>;
    /// Writes what the loops queued this turn (the frames of a connection
    /// shared by several loops), once every ready loop has run, so that a
    /// batch of requests is one write.
    fn flush(_lanes: &Self::Lanes, _cx: &mut Context<'_>) {}
}

/// The worker's view of the run, borrowed by every connection loop.
pub struct WorkerCtx<W: Wire> {
    pub shared: Arc<Shared<W>>,
    pub connector: Connector,
    pub recorder: RefCell<Recorder>,
    pub sink: BodySink,
    /// Scenarios: iterations started by this worker (numbers them).
    pub iterations: std::cell::Cell<u64>,
    pub worker: usize,
    pub workers: usize,
    /// What the worker's loops share for the run's protocol.
    pub lanes: W::Lanes,
    /// A script run's callbacks in this worker's Lua state.
    pub script: Option<crate::script::worker::ScriptWorker>,
    /// A VU run's Lua state in this worker.
    pub users: Option<crate::vu::VuWorker>,
    /// A VU run: the request names this worker has met.
    pub seen_names: RefCell<crate::vu::names::SeenNames>,
}

impl<W: Wire> WorkerCtx<W> {
    /// Writes what the loops queued this turn (see [`Wire::flush`]).
    pub(super) fn flush(&self, cx: &mut Context<'_>) {
        W::flush(&self.lanes, cx);
    }
}

/// What a round sends.
pub enum Outgoing<'a, R> {
    /// `count` of the run's one request, encoded before the run; over
    /// HTTP/1.1 they go out pipelined in one write.
    Fixed { request: &'a R, count: u32 },
    /// A plan's request, rendered for this send, and where its response's
    /// headers and body go; the protocol encodes it for each send.
    Rendered {
        request: &'a Request<'a>,
        capture: &'a mut Capture,
    },
    /// Requests `requests` of a script's text (wrk's `request()`): over
    /// HTTP/1.1 their bytes go out as the script wrote them, in one write;
    /// the other protocols send each in turn, encoded from the text's
    /// fields (copied into `fields`). `capture`, when the script reads
    /// responses, is given one request at a time.
    Written {
        text: &'a RequestText,
        requests: Range<usize>,
        fields: &'a mut Fields,
        capture: Option<&'a mut Capture>,
        /// The run's target: the origin the text's requests go to.
        target: &'a Target,
    },
}

/// Requests of a round that got no response, and why.
#[derive(Debug)]
pub struct Lost {
    pub err: RequestError,
    pub count: u32,
}

/// When a round of `ticket` goes out: now in the open model (its lag
/// behind the ticket's time recorded), and the ticket's own time in the
/// closed model, whose tickets are taken at the moment of sending.
pub(super) fn send_time<W: Wire>(ctx: &WorkerCtx<W>, ticket: Ticket) -> Instant {
    if !ctx.shared.model.is_open() {
        return ticket.intended;
    }
    let sent_at = Instant::now();
    let delay = sent_at.saturating_duration_since(ticket.intended);
    ctx.recorder.borrow_mut().record_send_delay(delay, ticket.queued);
    sent_at
}

/// Records one answered request, received when its head says or else
/// now; returns the instant read.
pub(super) fn record_response<W: Wire>(
    ctx: &WorkerCtx<W>,
    ticket: Ticket,
    sent_at: Instant,
    head: ResponseHead,
) -> Instant {
    let now = Instant::now();
    // A request its connection held back (`--coalesce`, closed model only)
    // was sent when it went out, not when its ticket was taken.
    let (intended, sent_at) = head.sent_at.map_or((ticket.intended, sent_at), |t| (t, t));
    // A stamp from before the send (bytes a server sent unasked, read
    // with this response) cannot be its arrival: then it counts as read.
    let received = head.received_at.filter(|&at| at >= sent_at).unwrap_or(now);
    let (latency_us, service_us) = latency_and_service(intended, sent_at, received);
    let sample = Sample {
        latency_us,
        service_us,
        bytes: head.bytes,
        outcome: classify(ctx, head.status),
    };
    ctx.recorder.borrow_mut().record(&sample);
    ctx.shared.offered_h3(head.h3_offer);
    now
}

pub(super) fn micros_between(from: Instant, to: Instant) -> u64 {
    let elapsed = to.saturating_duration_since(from);
    // Not `as_micros`, which multiplies in 128 bits; a u64 of microseconds
    // lasts 584,000 years.
    elapsed.as_secs() * 1_000_000 + u64::from(elapsed.subsec_micros())
}

/// Microseconds from the intended send and from the actual one to `now`:
/// one subtraction when they are the same instant, as in the closed model.
fn latency_and_service(intended: Instant, sent_at: Instant, now: Instant) -> (u64, u64) {
    let latency = micros_between(intended, now);
    if sent_at == intended {
        return (latency, latency);
    }
    (latency, micros_between(sent_at, now))
}

/// Records `count` requests failed with `err`, keeping it as an example.
pub(super) fn fail<W: Wire>(
    ctx: &WorkerCtx<W>,
    err: &RequestError,
    ticket: Ticket,
    sent_at: Instant,
    count: u32,
) {
    let now = Instant::now();
    let mut recorder = ctx.recorder.borrow_mut();
    if recorder.wants_example(err.kind) {
        recorder.note_error(err);
    }
    let (latency_us, service_us) = latency_and_service(ticket.intended, sent_at, now);
    let sample = Sample {
        latency_us,
        service_us,
        bytes: 0,
        outcome: Outcome::Failed(err.kind),
    };
    for _ in 0..count {
        recorder.record(&sample);
    }
}

pub(super) fn classify<W: Wire>(ctx: &WorkerCtx<W>, status: u16) -> Outcome {
    if ctx.shared.success.contains(status) {
        return Outcome::Ok { status };
    }
    let mut recorder = ctx.recorder.borrow_mut();
    if recorder.wants_example(ErrorKind::Status) {
        recorder.note_error(&RequestError::new(ErrorKind::Status, ErrorDetail::Status(status)));
    }
    Outcome::BadStatus { status }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn latency_runs_from_the_intended_send_and_service_from_the_actual() {
        let intended = Instant::now();
        let now = intended + Duration::new(2, 345_678_901);
        assert_eq!(
            latency_and_service(intended, intended, now),
            (2_345_678, 2_345_678)
        );
        let sent_at = intended + Duration::from_micros(1_500);
        assert_eq!(
            latency_and_service(intended, sent_at, now),
            (2_345_678, 2_344_178)
        );
        // A clock read before the send (never expected) counts as zero.
        assert_eq!(micros_between(now, intended), 0);
    }
}
