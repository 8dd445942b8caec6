//! The one request loop and what it records.
//!
//! Every load model runs through [`connection_loop`]: it asks the [`Feed`]
//! for a ticket, sends (one request, or a pipelined round), reads the
//! responses and records a sample each. Latency runs from the ticket's
//! intended time; the service time from the actual send. Nothing here locks
//! or allocates per request: the recorder is this thread's own.

use super::Shared;
use super::feed::{Feed, Ticket};
use crate::http1::{BodySink, Capture, ResponseHead, ResponseReader};
use crate::net::{Connector, Stream};
use crate::recorder::Recorder;
use crate::sample::{ErrorDetail, ErrorKind, Outcome, RequestError, Sample};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use std::cell::RefCell;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;
use tokio::io::AsyncWriteExt;

/// One connection's state, reused across requests and phases.
#[derive(Default)]
pub struct Slot {
    pub(super) stream: Option<Stream>,
    reader: ResponseReader,
    /// A scenario's per-connection buffers and variables, made on first use.
    pub(super) iteration: Option<Box<super::iteration::IterationState>>,
    /// Set while a request is on the wire; a slot left busy (its request was
    /// cancelled) is reconnected before reuse.
    busy: bool,
}

/// The worker's view of the run, borrowed by every connection loop.
pub struct WorkerCtx {
    pub shared: Arc<Shared>,
    pub connector: Connector,
    pub recorder: RefCell<Recorder>,
    pub sink: BodySink,
    /// Scenarios: iterations started by this worker (numbers them).
    pub iterations: std::cell::Cell<u64>,
    pub worker: usize,
    pub workers: usize,
}

/// A connection loop yields to the runtime after this many requests, so
/// one that never waits (a refused connect on loopback fails at once) cannot
/// starve the interval ticker, the deadline or the stop flag.
const YIELD_EVERY: u32 = 32;

/// Runs every connection's loop until the feed runs dry; returns the slots
/// (so warm-up connections carry over into the measured phase). In the open
/// model the pacer may ask for more connections while it runs.
///
/// The loops run outside tokio's cooperative budget: the budget belongs to
/// the one task polling all of them, so with thousands of connections it ran
/// out after 128 operations and every other ready connection was polled,
/// refused and re-woken in vain (10,000 connections: 45k req/s and most
/// connections starved; without the budget 137k req/s). [`YIELD_EVERY`]
/// keeps the fairness the budget gave.
pub async fn drive(ctx: &WorkerCtx, slots: Vec<Slot>, feed: &Feed) -> Vec<Slot> {
    let mut next_index = slots.len();
    let mut loops: FuturesUnordered<_> = slots
        .into_iter()
        .enumerate()
        .map(|(i, slot)| connection_loop(ctx, i, slot, feed))
        .collect();
    let mut done = Vec::with_capacity(next_index);
    let all = std::future::poll_fn(|cx| {
        while feed.take_add_request(cx.waker()) {
            loops.push(connection_loop(ctx, next_index, Slot::default(), feed));
            next_index += 1;
        }
        loop {
            match loops.poll_next_unpin(cx) {
                Poll::Ready(Some(slot)) => done.push(slot),
                Poll::Ready(None) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    });
    tokio::task::coop::unconstrained(all).await;
    done
}

/// The one request loop: take a ticket, send, read, record, until the feed
/// says stop. Each round sends up to `--pipeline` requests in one write (one
/// without pipelining) and reads their responses in order.
async fn connection_loop(ctx: &WorkerCtx, index: usize, mut slot: Slot, feed: &Feed) -> Slot {
    let mut since_yield = 0u32;
    while let Some(ticket) = feed.next(index).await {
        since_yield += ticket.count;
        if since_yield >= YIELD_EVERY {
            since_yield = 0;
            tokio::task::yield_now().await;
        }
        match &ctx.shared.scenario {
            Some(scenario) => super::iteration::run(ctx, &mut slot, ticket, scenario).await,
            None => exchange(ctx, &mut slot, ticket).await,
        }
    }
    slot
}

/// Connects if the slot has no usable connection (none yet, or one left
/// mid-request), marks it busy and writes `bytes`.
async fn connect_and_write(ctx: &WorkerCtx, slot: &mut Slot, bytes: &[u8]) -> Result<(), RequestError> {
    if slot.busy || slot.stream.is_none() {
        slot.stream = None;
        slot.stream = Some(ctx.connector.connect(&ctx.recorder).await?);
        slot.reader.clear();
    }
    slot.busy = true;
    let stream = slot.stream.as_mut().expect("connected just above");
    stream.write_all(bytes).await.map_err(RequestError::from_io)
}

/// One request on the slot's connection (connecting first if needed) and
/// its response, within the request timeout; the connection is dropped on
/// any failure or when the server closes it.
pub(super) async fn round_trip(
    ctx: &WorkerCtx,
    slot: &mut Slot,
    bytes: &[u8],
    is_head: bool,
    capture: Option<&mut Capture>,
) -> Result<ResponseHead, RequestError> {
    let timeout = ctx.shared.timeout;
    let work = async {
        connect_and_write(ctx, slot, bytes).await?;
        let stream = slot.stream.as_mut().expect("connected by connect_and_write");
        let head = slot
            .reader
            .read_response_into(stream, &ctx.sink, is_head, capture)
            .await?;
        slot.busy = false;
        Ok(head)
    };
    let result = match tokio::time::timeout(timeout, work).await {
        Ok(result) => result,
        Err(_) => Err(RequestError::new(
            ErrorKind::Timeout,
            ErrorDetail::Timeout(timeout),
        )),
    };
    if result
        .as_ref()
        .map_or(true, |head| head.close || !ctx.shared.keepalive)
    {
        slot.stream = None;
    }
    result
}

/// One round on a connection: connect if needed, write `count` requests at
/// once, read as many responses in order, recording each. Every response
/// must be complete within the request timeout of the actual send.
async fn exchange(ctx: &WorkerCtx, slot: &mut Slot, ticket: Ticket) {
    // The closed model's ticket is taken at the moment of sending.
    let sent_at = if ctx.shared.open_model {
        Instant::now()
    } else {
        ticket.intended
    };
    if ctx.shared.open_model {
        let delay = sent_at.saturating_duration_since(ticket.intended);
        ctx.recorder.borrow_mut().record_send_delay(delay, ticket.queued);
    }
    let deadline = tokio::time::Instant::from_std(sent_at + ctx.shared.timeout);
    let timed_out = || RequestError::new(ErrorKind::Timeout, ErrorDetail::Timeout(ctx.shared.timeout));
    let count = ticket.count;
    let send = connect_and_write(ctx, slot, ctx.shared.request.repeat_slice(count));
    let sent = tokio::time::timeout_at(deadline, send)
        .await
        .unwrap_or_else(|_| Err(timed_out()));
    if let Err(err) = sent {
        slot.stream = None;
        fail(ctx, &err, ticket, sent_at, count);
        return;
    }
    for answered in 0..count {
        let stream = slot.stream.as_mut().expect("connected above");
        let read = slot
            .reader
            .read_response(stream, &ctx.sink, ctx.shared.request.is_head);
        let head = match tokio::time::timeout_at(deadline, read)
            .await
            .unwrap_or_else(|_| Err(timed_out()))
        {
            Ok(head) => head,
            Err(err) => {
                // This request and every later one of the round are lost.
                slot.stream = None;
                fail(ctx, &err, ticket, sent_at, count - answered);
                return;
            }
        };
        let now = Instant::now();
        let sample = Sample {
            latency_us: micros_between(ticket.intended, now),
            service_us: micros_between(sent_at, now),
            bytes: head.bytes,
            outcome: classify(ctx, head.status),
        };
        ctx.recorder.borrow_mut().record(&sample);
        if head.close || !ctx.shared.keepalive {
            slot.stream = None;
            let unanswered = count - answered - 1;
            if unanswered > 0 {
                let err = RequestError::new(
                    ErrorKind::Reset,
                    ErrorDetail::Static(
                        "the server closed the connection with pipelined requests unanswered",
                    ),
                );
                fail(ctx, &err, ticket, sent_at, unanswered);
            }
            return;
        }
    }
    slot.busy = false;
}

pub(super) fn micros_between(from: Instant, to: Instant) -> u64 {
    to.saturating_duration_since(from).as_micros() as u64
}

/// Records `count` requests failed with `err`, keeping it as an example.
fn fail(ctx: &WorkerCtx, err: &RequestError, ticket: Ticket, sent_at: Instant, count: u32) {
    let now = Instant::now();
    let mut recorder = ctx.recorder.borrow_mut();
    if recorder.wants_example(err.kind) {
        recorder.note_error(err);
    }
    let sample = Sample {
        latency_us: micros_between(ticket.intended, now),
        service_us: micros_between(sent_at, now),
        bytes: 0,
        outcome: Outcome::Failed(err.kind),
    };
    for _ in 0..count {
        recorder.record(&sample);
    }
}

pub(super) fn classify(ctx: &WorkerCtx, status: u16) -> Outcome {
    if ctx.shared.success.contains(status) {
        return Outcome::Ok { status };
    }
    let mut recorder = ctx.recorder.borrow_mut();
    if recorder.wants_example(ErrorKind::Status) {
        recorder.note_error(&RequestError::new(ErrorKind::Status, ErrorDetail::Status(status)));
    }
    Outcome::BadStatus { status }
}
