//! The exchange pieces below both the request loop (`connection`) and the
//! plan driver (`iteration`): a connection's [`Slot`], the worker's context,
//! one `round_trip`, one pipelined `exchange` of the pre-built request,
//! and how an answer or a failure is recorded (`classify`).
//!
//! The protocol is a driver below the loop: HTTP/1.1 owns a connection per
//! loop; over HTTP/2 each loop is a lane on a connection shared by
//! `--streams` loops (see [`crate::http2`]). Latency runs from the ticket's
//! intended time; the service time from the actual send. Nothing here locks
//! or allocates per request: the recorder is this thread's own.

use super::Shared;
use super::feed::Ticket;
use crate::http1::{BodySink, Capture, ResponseHead, ResponseReader};
use crate::http2::{Home, Lane, Outbox};
use crate::net::{Connector, Stream};
use crate::recorder::Recorder;
use crate::sample::{ErrorDetail, ErrorKind, Outcome, RequestError, Sample};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;
use tokio::io::AsyncWrite;

/// One connection's state, reused across requests and phases.
#[derive(Default)]
pub struct Slot {
    pub(super) stream: Option<Stream>,
    reader: ResponseReader,
    /// Set while a request is on the wire; a slot left busy (its request was
    /// cancelled) is reconnected before reuse.
    busy: bool,
    /// Over HTTP/2: this loop's place on a shared connection.
    pub(super) h2: Option<Lane>,
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
    /// Over HTTP/2: the connection group new loops join until it is full.
    pub h2_home: RefCell<Option<Rc<Home>>>,
    /// Over HTTP/2: connections with frames to write, flushed once every
    /// ready loop has run (so a batch of requests is one write).
    pub h2_outbox: Rc<Outbox>,
}

impl WorkerCtx {
    /// A lane on the newest HTTP/2 connection group, or on a new group.
    pub(super) fn next_lane(&self) -> Lane {
        let mut home = self.h2_home.borrow_mut();
        if let Some(lane) = home.as_ref().and_then(|h| h.lane()) {
            return lane;
        }
        let fresh = Home::new(self.shared.streams, self.h2_outbox.clone());
        let lane = fresh.lane().expect("a new group has free lanes");
        *home = Some(fresh);
        lane
    }
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

/// Connects if the slot has no usable connection (none yet, or one left
/// mid-request), marks it busy and writes `bytes` (whose first request is
/// `first` bytes long), listening for an early answer while the socket is
/// full.
async fn connect_and_write(
    ctx: &WorkerCtx,
    slot: &mut Slot,
    bytes: &[u8],
    first: usize,
) -> Result<Written, RequestError> {
    if slot.busy || slot.stream.is_none() {
        slot.stream = None;
        slot.stream = Some(ctx.connector.connect(&ctx.recorder).await?);
        slot.reader.clear();
    }
    slot.busy = true;
    let stream = slot.stream.as_mut().expect("connected just above");
    Ok(write_listening(stream, &mut slot.reader, bytes, first).await)
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
    let keepalive = ctx.shared.keepalive;
    let https = ctx.shared.target.tls;
    let work = async {
        if let Some(lane) = slot.h2.as_mut() {
            return lane
                .round_trip_http1(&ctx.connector, &ctx.recorder, bytes, https, capture, keepalive)
                .await;
        }
        let written = connect_and_write(ctx, slot, bytes, bytes.len()).await?;
        let stream = slot.stream.as_mut().expect("connected by connect_and_write");
        let read = slot
            .reader
            .read_response_into(stream, &ctx.sink, is_head, capture)
            .await;
        match written {
            Written::All => {
                slot.busy = false;
                read
            }
            // The request was cut short: the connection goes with it.
            Written::Cut(write_err) => match read {
                Ok(head) => Ok(ResponseHead { close: true, ..head }),
                Err(read_err) => Err(write_err.unwrap_or(read_err)),
            },
        }
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
pub(super) async fn exchange(ctx: &WorkerCtx, slot: &mut Slot, ticket: Ticket) {
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
    if let Some(lane) = &slot.h2 {
        let request = ctx
            .shared
            .h2_request
            .as_ref()
            .expect("HTTP/2 runs encode their request");
        let exchange = lane.round_trip(&ctx.connector, &ctx.recorder, request, None, ctx.shared.keepalive);
        match tokio::time::timeout_at(deadline, exchange)
            .await
            .unwrap_or_else(|_| Err(timed_out()))
        {
            Ok(head) => record_response(ctx, ticket, sent_at, head),
            Err(err) => fail(ctx, &err, ticket, sent_at, 1),
        }
        return;
    }
    let count = ticket.count;
    let request = &ctx.shared.request;
    let send = connect_and_write(ctx, slot, request.repeat_slice(count), request.single);
    let sent = tokio::time::timeout_at(deadline, send)
        .await
        .unwrap_or_else(|_| Err(timed_out()));
    let cut = match sent {
        Ok(Written::All) => None,
        Ok(Written::Cut(write_err)) => Some(write_err),
        Err(err) => {
            slot.stream = None;
            fail(ctx, &err, ticket, sent_at, count);
            return;
        }
    };
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
                // This request and every later one of the round are lost;
                // a request cut short failed as its write did.
                slot.stream = None;
                let err = cut.flatten().unwrap_or(err);
                fail(ctx, &err, ticket, sent_at, count - answered);
                return;
            }
        };
        record_response(ctx, ticket, sent_at, head);
        if head.close || !ctx.shared.keepalive || cut.is_some() {
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

/// Records one answered request.
fn record_response(ctx: &WorkerCtx, ticket: Ticket, sent_at: Instant, head: ResponseHead) {
    let now = Instant::now();
    let sample = Sample {
        latency_us: micros_between(ticket.intended, now),
        service_us: micros_between(sent_at, now),
        bytes: head.bytes,
        outcome: classify(ctx, head.status),
    };
    ctx.recorder.borrow_mut().record(&sample);
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
