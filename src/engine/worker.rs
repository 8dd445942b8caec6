//! One worker: an OS thread with its own current-thread runtime, owning its
//! connections and its recorder.
//!
//! Phases (warm-up, measured) differ only in the [`Feed`] they hand the one
//! request loop in [`super::connection`] (its exchange pieces in [`super::exchange`]). Nothing on the per-request path
//! locks, allocates or touches another thread: the recorder sits in a
//! `RefCell` on this thread and is swapped out once per interval.

use super::batching;
use super::budget::{Budget, Limit};
use super::connection::{LoopSlot, drive, open_connections};
use super::exchange::WorkerCtx;
use super::fast_path::FastPath;
use super::feed::{ClosedFeed, Feed, OpenFeed};
use super::race::{self, Job};
use super::{LoadModel, Shared, WorkerMsg, Workload};
use crate::net::Backend;
use crate::net::Connector;
use crate::net::uring::Ring;
use crate::recorder::{Recorder, Snapshot};
use crate::response::BodySink;
use crate::script::worker::ScriptWorker;
use crate::sys::thread_cpu;
use std::cell::{Cell, RefCell};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

/// What one worker is asked to do.
#[derive(Clone, Debug)]
pub struct WorkerSpec {
    pub id: usize,
    /// Connections this worker opens (at the peak of a ramp).
    pub connections: usize,
    /// This worker's share of the load (connections or rate).
    pub share: f64,
    /// Worker `id`'s offset in the open model's schedule, in [0, 1).
    pub phase: f64,
    /// How many workers the run has (numbers scenario iterations).
    pub workers: usize,
    /// More connections the open model may add when all are busy.
    pub may_add: usize,
    pub warmup: Option<Limit>,
    pub measured: Limit,
}

/// How often a worker looks at the shared stop flag (Ctrl-C). Polling a
/// timer keeps the flag off the per-request path.
const STOP_POLL: Duration = Duration::from_millis(20);

/// The open model opens its connections before its schedule starts, for
/// at most this long (or the connect timeout): a target that does not
/// answer delays the run by no more than this.
const PRECONNECT_AT_MOST: Duration = Duration::from_secs(1);

/// Builds a phase's feed for this worker.
fn feed_for<W: FastPath>(
    shared: &Shared<W>,
    spec: &WorkerSpec,
    limit: &Limit,
    start: Instant,
    ramped: bool,
    ring: Option<&Rc<Ring>>,
) -> Feed {
    let deadline = limit.duration.map(|d| start + d);
    match &shared.model {
        LoadModel::Closed { ramp } => Feed::Closed(ClosedFeed {
            budget: Budget::new(limit.requests, deadline),
            pipeline: shared.transport.pipeline,
            // A ramp of connections admits their request loops (streams).
            ramp: ramp
                .as_ref()
                .filter(|_| ramped)
                .map(|r| (r.scaled(spec.share * shared.transport.streams as f64), start)),
        }),
        // A warm-up (never ramped: stages take none) runs at the fixed rate.
        LoadModel::Open { schedule } => Feed::Open(OpenFeed::new(
            schedule.scaled(spec.share),
            spec.phase,
            start,
            limit.requests,
            deadline,
            spec.may_add * shared.transport.streams,
            ring,
        )),
    }
}

/// Runs a worker to completion on the calling thread, reporting through `tx`.
///
/// `spares` brings the empty snapshots the worker swaps in once per
/// interval: recycled by the collector, so the swap allocates nothing here.
pub fn run<W: FastPath>(
    spec: WorkerSpec,
    shared: Arc<Shared<W>>,
    tx: Sender<WorkerMsg>,
    spares: Receiver<Snapshot>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            let _ = tx.send(WorkerMsg::Failed(format!("cannot start a worker runtime: {err}")));
            shared.barrier.wait();
            return;
        }
    };
    // Feeds register their timer with this runtime's reactor.
    let _entered = runtime.enter();
    let mut connector = Connector::new(
        &shared.target,
        shared.tls.clone(),
        shared.transport.connect_timeout,
    );
    if shared.transport.io.backend == Backend::Uring {
        match Ring::new(spec.connections + spec.may_add) {
            Ok(ring) => {
                if batching::may_batch(&shared, spec.connections) {
                    ring.stamp_receives();
                }
                connector = connector.on_ring(ring);
            }
            // The probe passed but this ring was refused (a limit on locked
            // memory or on rings): this worker runs on epoll, the run goes on.
            Err(err) => eprintln!(
                "note: worker {} runs on epoll: io_uring refused its ring ({err})",
                spec.id
            ),
        }
    }
    // A script's `setup()` may have chosen this thread's server.
    let thread = shared.script.as_ref().and_then(|s| s.threads.get(spec.id));
    if let Some(addr) = thread.and_then(|t| t.cell.addr()) {
        connector = connector.to(addr);
    }
    let script = match (&shared.workload, thread) {
        (Workload::Script, Some(thread)) => match ScriptWorker::new(thread) {
            Ok(script) => Some(script),
            Err(message) => {
                let _ = tx.send(WorkerMsg::Failed(message));
                shared.barrier.wait();
                return;
            }
        },
        _ => None,
    };
    let users = match (&shared.workload, &shared.users) {
        (Workload::Users, Some(users)) => match crate::vu::VuWorker::new(users) {
            Ok(state) => Some(state),
            Err(message) => {
                let _ = tx.send(WorkerMsg::Failed(message));
                shared.barrier.wait();
                return;
            }
        },
        _ => None,
    };
    let lanes = W::lanes(&shared, connector.ring());
    let ctx = WorkerCtx {
        connector,
        recorder: RefCell::new(Recorder::with_steps(shared.workload.steps())),
        sink: BodySink::default(),
        iterations: Cell::new(0),
        lanes,
        script,
        users,
        seen_names: RefCell::default(),
        worker: spec.id,
        workers: spec.workers,
        shared,
    };
    // One request loop per connection, or per HTTP/2 stream.
    let loops = spec.connections * ctx.shared.transport.streams;
    let mut slots: Vec<LoopSlot<W>> = (0..loops).map(|_| LoopSlot::default()).collect();
    if ctx.shared.model.is_open() {
        // The schedule starts at full rate: its connections must be open by
        // then (see `open_connections`).
        let within = ctx.shared.transport.connect_timeout.min(PRECONNECT_AT_MOST);
        block_on(&runtime, &ctx, async {
            tokio::select! {
                _ = open_connections(&ctx, &mut slots, within) => {}
                _ = stop_requested(&ctx) => {}
            }
        });
    }

    if let Some(limit) = spec.warmup {
        let began = Instant::now();
        // The warm-up runs at the plain load (no ramp).
        let feed = feed_for(&ctx.shared, &spec, &limit, began, false, ctx.connector.ring());
        slots = block_on(&runtime, &ctx, async {
            // At the warm-up's end no new request starts but those in flight
            // finish, so the connections stay usable for the measured phase.
            let loops = pin!(drive(&ctx, slots, &feed));
            let pacer = pin!(async {
                forever(feed.pace(&ctx.recorder)).await;
                Vec::new()
            });
            let stop = pin!(async {
                stop_requested(&ctx).await;
                Vec::new()
            });
            race::first([loops as Job<'_, Vec<LoopSlot<W>>>, pacer, stop]).await
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
    let feed = feed_for(
        &ctx.shared,
        &spec,
        &spec.measured,
        start,
        true,
        ctx.connector.ring(),
    );
    let next_index = Cell::new(0u64);
    if let Some(ring) = ctx.connector.ring() {
        ring.set_batch(batching::batch(&ctx, &feed, spec.connections));
    }
    block_on(&runtime, &ctx, async {
        // In this order: when the deadline and an interval tick fall due
        // together, the deadline wins and the last interval is reported
        // whole. The pacer comes before the connections: a ticket falls
        // due on its timer, and issuing it must not wait until every
        // connection with a response in has been served (hundreds, after a
        // burst).
        let end = pin!(sleep_until(deadline));
        let stop = pin!(stop_requested(&ctx));
        let pacer = pin!(forever(feed.pace(&ctx.recorder)));
        let loops = pin!(async {
            drive(&ctx, slots, &feed).await;
        });
        let ticks = pin!(tick(&ctx, spec.id, start, &next_index, &tx, &spares));
        race::first([end as Job<'_, ()>, stop, pacer, loops, ticks]).await
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

/// Runs a phase on the worker's runtime, and on its ring when its sockets
/// are driven by io_uring.
fn block_on<W: FastPath, F: Future>(
    runtime: &tokio::runtime::Runtime,
    ctx: &WorkerCtx<W>,
    work: F,
) -> F::Output {
    match ctx.connector.ring() {
        Some(ring) => runtime.block_on(ring.run(work)),
        None => runtime.block_on(work),
    }
}

/// Runs `work`, then waits forever: the pacer finishing must not end the
/// phase, the connections draining its tickets do.
async fn forever(work: impl std::future::Future<Output = ()>) {
    work.await;
    std::future::pending::<()>().await;
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

async fn stop_requested<W: FastPath>(ctx: &WorkerCtx<W>) {
    while !ctx.shared.stop.load(Ordering::Relaxed) {
        tokio::time::sleep(STOP_POLL).await;
    }
}

/// Hands the collector one snapshot per interval, on the run's clock.
async fn tick<W: FastPath>(
    ctx: &WorkerCtx<W>,
    worker: usize,
    start: Instant,
    next_index: &Cell<u64>,
    tx: &Sender<WorkerMsg>,
    spares: &Receiver<Snapshot>,
) {
    let interval = ctx.shared.interval;
    loop {
        let index = next_index.get();
        let due = start + interval.saturating_mul(u32::try_from(index + 1).unwrap_or(u32::MAX));
        tokio::time::sleep_until(due.into()).await;
        // A collector far behind has sent no spare yet: then, and only
        // then, the swap allocates one.
        let spare = spares.try_recv().unwrap_or_default();
        let snapshot = ctx.recorder.borrow_mut().swap(spare);
        let _ = tx.send(WorkerMsg::Interval {
            worker,
            index,
            snapshot,
        });
        next_index.set(index + 1);
    }
}
