//! One worker: an OS thread with its own current-thread runtime, owning its
//! connections and its recorder.
//!
//! There is exactly one request loop ([`connection_loop`]); phases (warm-up,
//! measured) differ only in the [`Budget`] they hand it. Nothing on the
//! per-request path locks, allocates or touches another thread: the recorder
//! sits in a `RefCell` on this thread and is swapped out once per interval.

use super::budget::{Budget, Limit};
use super::{Shared, WorkerMsg};
use crate::http1::{BodySink, ResponseReader};
use crate::net::{Connector, Stream};
use crate::recorder::Recorder;
use crate::sample::{ErrorDetail, ErrorKind, Outcome, RequestError, Sample};
use crate::sys::thread_cpu;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// What one worker is asked to do.
#[derive(Clone, Copy, Debug)]
pub struct WorkerSpec {
    pub id: usize,
    pub connections: usize,
    pub warmup: Option<Limit>,
    pub measured: Limit,
}

/// How often a worker looks at the shared stop flag (Ctrl-C). Polling a
/// timer keeps the flag off the per-request path.
const STOP_POLL: Duration = Duration::from_millis(20);

/// One connection's state, reused across requests.
#[derive(Default)]
struct Slot {
    stream: Option<Stream>,
    reader: ResponseReader,
    /// Set while a request is on the wire; a slot left busy (its request was
    /// cancelled at the deadline) is reconnected before reuse.
    busy: bool,
}

/// The worker's view of the run, borrowed by every connection loop.
struct WorkerCtx {
    shared: Arc<Shared>,
    connector: Connector,
    recorder: RefCell<Recorder>,
    sink: BodySink,
}

/// Runs a worker to completion on the calling thread, reporting through `tx`.
pub fn run(spec: WorkerSpec, shared: Arc<Shared>, tx: Sender<WorkerMsg>) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            let _ = tx.send(WorkerMsg::Failed(format!("cannot start a worker runtime: {err}")));
            shared.barrier.wait();
            return;
        }
    };
    let ctx = WorkerCtx {
        connector: Connector::new(&shared.target, shared.tls.clone(), shared.connect_timeout),
        shared,
        recorder: RefCell::new(Recorder::default()),
        sink: BodySink::default(),
    };
    let mut slots: Vec<Slot> = (0..spec.connections).map(|_| Slot::default()).collect();

    if let Some(limit) = spec.warmup {
        let began = Instant::now();
        let budget = Budget::new(limit.requests, limit.duration.map(|d| began + d));
        runtime.block_on(async {
            // At the warm-up's end no new request starts but those in flight
            // finish, so the connections stay usable for the measured phase.
            tokio::select! {
                _ = drive(&ctx, &mut slots, &budget) => {}
                _ = stop_requested(&ctx) => {}
            }
        });
        let snapshot = ctx.recorder.borrow_mut().take();
        let _ = tx.send(WorkerMsg::Warmup {
            snapshot,
            elapsed: began.elapsed(),
        });
    }

    // Every worker starts measuring at the same instant.
    ctx.shared.barrier.wait();
    let start = *ctx.shared.start.get_or_init(Instant::now);
    let cpu_before = thread_cpu();
    let deadline = spec.measured.duration.map(|d| start + d);
    let budget = Budget::new(spec.measured.requests, deadline);
    let next_index = Cell::new(0u64);
    runtime.block_on(async {
        // `biased`: when the deadline and an interval tick fall due together,
        // the deadline wins and the last interval is reported whole.
        tokio::select! {
            biased;
            _ = sleep_until(deadline) => {}
            _ = stop_requested(&ctx) => {}
            _ = drive(&ctx, &mut slots, &budget) => {}
            _ = tick(&ctx, spec.id, start, &next_index, &tx) => {}
        }
    });
    let elapsed = start.elapsed();
    let cpu = thread_cpu() - cpu_before;
    let snapshot = ctx.recorder.borrow_mut().take();
    let index = next_index.get();
    let _ = tx.send(WorkerMsg::Finished {
        worker: spec.id,
        index,
        snapshot,
        elapsed,
        cpu,
    });
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

async fn stop_requested(ctx: &WorkerCtx) {
    while !ctx.shared.stop.load(Ordering::Relaxed) {
        tokio::time::sleep(STOP_POLL).await;
    }
}

/// Hands the collector one snapshot per interval, on the run's clock.
async fn tick(
    ctx: &WorkerCtx,
    worker: usize,
    start: Instant,
    next_index: &Cell<u64>,
    tx: &Sender<WorkerMsg>,
) {
    let interval = ctx.shared.interval;
    loop {
        let index = next_index.get();
        let due = start + interval.saturating_mul(u32::try_from(index + 1).unwrap_or(u32::MAX));
        tokio::time::sleep_until(due.into()).await;
        let snapshot = ctx.recorder.borrow_mut().take();
        let _ = tx.send(WorkerMsg::Interval {
            worker,
            index,
            snapshot,
        });
        next_index.set(index + 1);
    }
}

/// A connection loop yields to the runtime after this many requests, so
/// one that never waits (a refused connect on loopback fails at once) cannot
/// starve the interval ticker, the deadline or the stop flag.
const YIELD_EVERY: u32 = 32;

/// Runs every connection's loop until the budget is spent.
///
/// The loops run outside tokio's cooperative budget: the budget belongs to
/// the one task polling all of them, so with thousands of connections it ran
/// out after 128 operations and every other ready connection was polled,
/// refused and re-woken in vain (10,000 connections: 45k req/s and most
/// connections starved; without the budget 137k req/s). [`YIELD_EVERY`]
/// keeps the fairness the budget gave.
async fn drive(ctx: &WorkerCtx, slots: &mut [Slot], budget: &Budget) {
    let mut loops: FuturesUnordered<_> = slots
        .iter_mut()
        .map(|slot| connection_loop(ctx, slot, budget))
        .collect();
    tokio::task::coop::unconstrained(async { while loops.next().await.is_some() {} }).await
}

/// The one request loop: send, read, record, until the budget says stop.
/// Each round sends up to `--pipeline` requests in one write (one without
/// pipelining) and reads their responses in order.
async fn connection_loop(ctx: &WorkerCtx, slot: &mut Slot, budget: &Budget) {
    let mut since_yield = 0u32;
    while let Some((sent_at, count)) = budget.take_batch(ctx.shared.pipeline) {
        since_yield += count;
        if since_yield >= YIELD_EVERY {
            since_yield = 0;
            tokio::task::yield_now().await;
        }
        exchange(ctx, slot, sent_at, count).await;
    }
}

/// One round on a connection: connect if needed, write `count` requests at
/// once, read as many responses in order, recording each. Every response
/// must be complete within the request timeout of the round's send.
async fn exchange(ctx: &WorkerCtx, slot: &mut Slot, sent_at: Instant, count: u32) {
    let deadline = tokio::time::Instant::from_std(sent_at + ctx.shared.timeout);
    let timed_out = || RequestError::new(ErrorKind::Timeout, ErrorDetail::Timeout(ctx.shared.timeout));
    let send = async {
        if slot.busy || slot.stream.is_none() {
            slot.stream = None;
            slot.stream = Some(ctx.connector.connect().await?);
            slot.reader.clear();
        }
        slot.busy = true;
        let stream = slot.stream.as_mut().expect("connected just above");
        let bytes = &ctx.shared.request;
        stream
            .write_all(bytes.repeat_slice(count))
            .await
            .map_err(RequestError::from_io)
    };
    let sent = tokio::time::timeout_at(deadline, send)
        .await
        .unwrap_or_else(|_| Err(timed_out()));
    if let Err(err) = sent {
        slot.stream = None;
        fail(ctx, &err, sent_at, count);
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
                fail(ctx, &err, sent_at, count - answered);
                return;
            }
        };
        let sample = Sample {
            latency_us: micros_since(sent_at),
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
                fail(ctx, &err, sent_at, unanswered);
            }
            return;
        }
    }
    slot.busy = false;
}

fn micros_since(start: Instant) -> u64 {
    start.elapsed().as_micros() as u64
}

/// Records `count` requests failed with `err`, keeping it as an example.
fn fail(ctx: &WorkerCtx, err: &RequestError, sent_at: Instant, count: u32) {
    let mut recorder = ctx.recorder.borrow_mut();
    if recorder.wants_example(err.kind) {
        recorder.note_error(err);
    }
    let sample = Sample {
        latency_us: micros_since(sent_at),
        bytes: 0,
        outcome: Outcome::Failed(err.kind),
    };
    for _ in 0..count {
        recorder.record(&sample);
    }
}

fn classify(ctx: &WorkerCtx, status: u16) -> Outcome {
    if ctx.shared.success.contains(status) {
        return Outcome::Ok { status };
    }
    let mut recorder = ctx.recorder.borrow_mut();
    if recorder.wants_example(ErrorKind::Status) {
        recorder.note_error(&RequestError::new(ErrorKind::Status, ErrorDetail::Status(status)));
    }
    Outcome::BadStatus { status }
}
