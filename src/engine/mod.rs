//! Runs one target of a plan: starts the workers, merges what they report,
//! and returns the measured totals and series.
//!
//! The caller watches the run through an [`Observer`] (the live view and the
//! per-interval log); the engine itself prints nothing.

mod batching;
pub mod budget;
pub mod connection;
pub mod driver;
pub mod exchange;
pub mod feed;
pub mod iteration;
mod lean_h1;
mod lean_h2;
pub mod protocol;
mod race;
pub mod timer;
pub mod worker;

use crate::collector::{Collector, FinishedRow, SeriesRow};
use crate::http1::RequestBytes;
use crate::http2::H2Request;
use crate::http3::H3Request;
use crate::plan::{Plan, StatusSet, Warmup, share};
use crate::recorder::Snapshot;
use crate::request::{Fields, Overrides, Request};
pub use crate::shape::LoadModel;
use crate::sys::CpuTime;
use crate::target::Target;
use crate::tls::TlsSetup;
use budget::Limit;
pub use protocol::{Prepared, Protocol};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};
use thiserror::Error;
use worker::WorkerSpec;

/// Why a run could not happen at all (as opposed to requests failing).
#[derive(Debug, Error)]
pub enum EngineError {
    /// A worker, or the collecting thread, failed mid-run: its message.
    #[error("worker failed: {0}")]
    Worker(String),
    /// The encoder's message.
    #[error("the request cannot be sent over HTTP/2: {0}")]
    Http2Request(String),
    #[error("the request cannot be sent over HTTP/3: {0}")]
    Http3Request(String),
    /// `0` names the thread.
    #[error("cannot start {0}")]
    Thread(&'static str, #[source] std::io::Error),
    #[error(transparent)]
    Protocol(#[from] protocol::ProtocolError),
    /// The watched process cannot be sampled.
    #[error(transparent)]
    Monitor(#[from] crate::monitor::MonitorError),
}

/// What every worker of a run shares, read-only.
pub struct Shared {
    pub target: Target,
    /// The run's one request, as its protocol sends it (which also says
    /// the protocol).
    pub prepared: Prepared,
    /// The plan's transport settings as they are: timeouts, keep-alive,
    /// pipelining, HTTP/2 streams per connection (request loops per
    /// connection; 1 for HTTP/1.1).
    pub transport: crate::plan::Transport,
    pub success: StatusSet,
    pub model: LoadModel,
    /// A plan file's steps (`volley plan`); `None` sends `request`.
    pub scenario: Option<Arc<crate::scenario::Scenario>>,
    /// Whether requests have intended send times (the open model).
    pub open_model: bool,
    pub tls: Option<TlsSetup>,
    pub interval: Duration,
    /// Set on Ctrl-C; workers poll it on a timer.
    pub stop: Arc<AtomicBool>,
    /// Workers meet here after warm-up so measuring starts together.
    pub barrier: Barrier,
    /// The measured phase's start, set by the first worker past the barrier.
    pub start: OnceLock<Instant>,
    /// The first port a response's `Alt-Svc` offered HTTP/3 on.
    pub h3_offer: OnceLock<u16>,
}

impl Shared {
    /// Keeps the first HTTP/3 offer a response made: a read of a line no
    /// worker writes once it is set.
    fn offered_h3(&self, offer: Option<u16>) {
        if let Some(port) = offer
            && self.h3_offer.get().is_none()
        {
            let _ = self.h3_offer.set(port);
        }
    }
}

/// Messages from workers to the collecting thread, once per interval each.
pub enum WorkerMsg {
    Warmup {
        snapshot: Snapshot,
        elapsed: Duration,
    },
    Interval {
        worker: usize,
        index: u64,
        snapshot: Snapshot,
    },
    Finished {
        worker: usize,
        index: u64,
        snapshot: Snapshot,
        elapsed: Duration,
        cpu: CpuTime,
    },
    Failed(String),
}

/// A phase's totals.
#[derive(Clone, Debug)]
pub struct PhaseSummary {
    pub snapshot: Snapshot,
    pub elapsed: Duration,
}

/// The measured result of one target.
#[derive(Debug)]
pub struct RunResult {
    pub warmup: Option<PhaseSummary>,
    pub total: Snapshot,
    pub series: Vec<SeriesRow>,
    /// Scenarios: each step's series.
    pub step_series: Vec<Vec<SeriesRow>>,
    /// The watched target exited during the run.
    pub target_exited: bool,
    /// The watched target before the load started.
    pub target_before: Option<crate::monitor::ProcSample>,
    pub elapsed: Duration,
    /// CPU time of the worker threads during the measured phase.
    pub cpu: CpuTime,
    pub threads: usize,
    /// Stopped by Ctrl-C before its planned end.
    pub interrupted: bool,
    /// The protocol spoken: `http/1.1`, `h2`, `h2c` or `h3`.
    pub protocol: &'static str,
    /// How the workers waited on their sockets: `io_uring` or `epoll`.
    pub io: &'static str,
    /// The UDP port a response's `Alt-Svc` offered HTTP/3 on, if one did
    /// (see [`crate::response::ResponseHead::h3_offer`]).
    pub h3_offer: Option<u16>,
}

/// Watches a run as it goes, on the run's collecting thread (a thread of
/// its own, in the background for the open model: see
/// [`crate::sys::ThreadPriority`]), hence `Send`.
pub trait Observer: Send {
    fn warmup_done(&mut self, _warmup: &PhaseSummary) {}
    /// A finished interval: the totals, and each scenario step's row.
    fn row(&mut self, _row: &SeriesRow, _steps: &[SeriesRow]) {}
    /// The same finished interval in full (its histograms, statuses and
    /// errors by kind), called right after [`Observer::row`], with the run's
    /// totals up to and including it: what the metric outputs export. Once
    /// per interval, never per request.
    fn interval_snapshot(&mut self, _interval: &Snapshot, _total: &Snapshot) {}
    /// Called a few times a second during the measured phase.
    fn tick(&mut self, _elapsed: Duration, _so_far: &Snapshot, _last: Option<&SeriesRow>) {}
}

/// An observer that watches nothing.
pub struct Silent;
impl Observer for Silent {}

/// How often the collecting thread wakes to refresh the live view.
const TICK: Duration = Duration::from_millis(250);

/// Splits a phase's request count over workers in proportion to their
/// connections, so the total stays exact.
fn worker_limit(plan: &Plan, worker: usize, requests: Option<u64>, duration: Option<Duration>) -> Limit {
    let requests = requests.map(|n| {
        // Connections per worker differ by at most one; split requests the
        // same way they split connections.
        let mut before = 0u64;
        for i in 0..worker {
            before += plan.connections_of(i) as u64;
        }
        let mine = plan.connections_of(worker) as u64;
        let total = plan.load.connections as u64;
        let start = n * before / total;
        let end = n * (before + mine) / total;
        end - start
    });
    Limit { requests, duration }
}

/// Hands a newly finished row to the observer with its steps' rows, its
/// full snapshot and the totals up to it.
fn emit(finished: FinishedRow, observer: &mut dyn Observer) {
    observer.row(finished.row, finished.steps);
    observer.interval_snapshot(finished.snapshot, finished.total);
}

/// What the collecting thread is given: the workers' messages, where to
/// send each worker its spare snapshots, how many warm-ups to wait for, and
/// the measured start (for the live view's clock).
struct Collecting<'a> {
    rx: Receiver<WorkerMsg>,
    spares: Vec<Sender<Snapshot>>,
    warmups: usize,
    start: &'a OnceLock<Instant>,
}

/// What the collecting thread gathered besides the collector itself.
struct Collected {
    warmup: Option<PhaseSummary>,
    /// The longest worker's measured phase.
    elapsed: Duration,
    /// The workers' CPU time in the measured phase.
    cpu: CpuTime,
    /// A worker's report that it could not run.
    failure: Option<String>,
}

impl Collecting<'_> {
    /// Merges the workers' messages until every worker is done, feeding
    /// `observer` each finished row and a few times a second the live view.
    /// Each snapshot a worker sends is answered with an empty one for its
    /// next swap (see [`Collector::spare`]).
    fn collect(self, collector: &mut Collector, observer: &mut dyn Observer) -> Collected {
        let mut warmup: Option<PhaseSummary> = None;
        let mut warmups_left = self.warmups;
        let mut elapsed = Duration::ZERO;
        let mut cpu = CpuTime::default();
        let mut failure = None;
        loop {
            match self.rx.recv_timeout(TICK) {
                Ok(WorkerMsg::Warmup { snapshot, elapsed }) => {
                    let phase = warmup.get_or_insert_with(|| PhaseSummary {
                        snapshot: Snapshot::default(),
                        elapsed,
                    });
                    phase.snapshot += &snapshot;
                    phase.elapsed = phase.elapsed.max(elapsed);
                    warmups_left -= 1;
                    if warmups_left == 0 {
                        observer.warmup_done(phase);
                    }
                }
                Ok(WorkerMsg::Interval {
                    worker,
                    index,
                    snapshot,
                }) => {
                    collector.interval(worker, index, snapshot, &mut |row| emit(row, observer));
                    // A worker that has finished has dropped its receiver.
                    let _ = self.spares[worker].send(collector.spare());
                }
                Ok(WorkerMsg::Finished {
                    worker,
                    index,
                    snapshot,
                    elapsed: worker_elapsed,
                    cpu: worker_cpu,
                }) => {
                    elapsed = elapsed.max(worker_elapsed);
                    cpu += worker_cpu;
                    collector.finished(worker, index, snapshot, worker_elapsed, &mut |row| {
                        emit(row, observer)
                    });
                }
                Ok(WorkerMsg::Failed(message)) => failure = Some(message),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if let Some(start) = self.start.get() {
                observer.tick(start.elapsed(), &collector.total, collector.series.last());
            }
        }
        Collected {
            warmup,
            elapsed,
            cpu,
            failure,
        }
    }
}

/// Runs the plan against one target.
pub fn run(
    plan: &Plan,
    target: &Target,
    stop: Arc<AtomicBool>,
    observer: &mut dyn Observer,
) -> Result<RunResult, EngineError> {
    let settled = protocol::settle(plan, target)?;
    // The run's one request, encoded once for the protocol it speaks.
    let asked = &plan.request;
    let fields = Fields::of(&asked.headers);
    let overrides = Overrides::of(asked.headers.iter().map(|(name, _)| name.as_str()));
    let path = target.path_and_query.as_bytes();
    let neutral = Request::to(target, &asked.method, path, &fields, overrides, &asked.body);
    let prepared = match settled.protocol {
        Protocol::Http1 => Prepared::Http1(
            RequestBytes::encode(&neutral, plan.transport.keepalive).pipelined(plan.transport.pipeline),
        ),
        Protocol::Http2 => {
            Prepared::Http2(H2Request::new(&neutral).map_err(|e| EngineError::Http2Request(e.message()))?)
        }
        Protocol::Http3 => {
            let tls = settled.tls.as_ref().expect("HTTP/3 runs over TLS");
            Prepared::Http3 {
                request: H3Request::new(&neutral).map_err(|e| EngineError::Http3Request(e.message()))?,
                quic: crate::http3::client_config(tls.client_config())
                    .map_err(protocol::ProtocolError::Quic)?,
            }
        }
    };
    let threads = plan.load.threads;
    let shared = Arc::new(Shared {
        target: target.clone(),
        prepared,
        transport: plan.transport.clone(),
        success: plan.request.success.clone(),
        model: plan.load.model(),
        scenario: plan.request.scenario.clone(),
        open_model: plan.load.pace.is_open(),
        tls: settled.tls,
        interval: plan.reporting.interval,
        stop,
        barrier: Barrier::new(threads),
        start: OnceLock::new(),
        h3_offer: OnceLock::new(),
    });
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::with_capacity(threads);
    // Each worker's empty snapshots for its swap once per interval: one up
    // front, then one back from the collector for every one it sends.
    let steps = plan.request.scenario.as_ref().map_or(0, |s| s.stat_names.len());
    let mut spare_senders = Vec::with_capacity(threads);
    for id in 0..threads {
        let (spare_tx, spares) = mpsc::channel();
        let _ = spare_tx.send(Snapshot::with_steps(steps));
        spare_senders.push(spare_tx);
        let warmup = plan.stop.warmup.map(|w| match w {
            Warmup::Duration(d) => Limit {
                requests: None,
                duration: Some(d),
            },
            Warmup::Requests(n) => worker_limit(plan, id, Some(n), None),
        });
        let connections = plan.connections_of(id);
        let extra = plan
            .load
            .max_connections
            .map_or(0, |max| max.saturating_sub(plan.load.connections));
        let spec = WorkerSpec {
            id,
            connections,
            share: connections as f64 / plan.load.connections as f64,
            // Workers stripe the shard's arrivals, shards the whole run's:
            // worker w of shard I takes global arrivals (k*T + w)*N + I.
            phase: (id as f64 + plan.shard.map_or(0.0, |s| s.phase())) / threads as f64,
            workers: threads,
            may_add: share(extra as u64, threads, id) as usize,
            warmup,
            measured: worker_limit(plan, id, plan.stop.requests, plan.stop.duration),
        };
        let (shared, tx) = (shared.clone(), tx.clone());
        let handle = std::thread::Builder::new()
            .name(format!("volley-worker-{id}"))
            .spawn(move || worker::run(spec, shared, tx, spares))
            .map_err(|e| EngineError::Thread("worker thread", e))?;
        handles.push(handle);
    }
    drop(tx);

    let mut collector = Collector::new(
        threads,
        plan.reporting.interval,
        shared.model.profile(plan.load.connections),
    );
    collector.open_model = shared.open_model;
    collector.monitor = Some(crate::monitor::Monitor::new(plan.watch.monitor_pid)?);
    let warmups = if plan.stop.warmup.is_some() { threads } else { 0 };
    let collecting = Collecting {
        rx,
        spares: spare_senders,
        warmups,
        start: &shared.start,
    };
    // In the open model the collecting thread runs in the background, so
    // its per-interval work never takes a core from a worker and delays the
    // schedule (see `ThreadPriority`).
    let priority = crate::sys::ThreadPriority::for_model(shared.open_model);
    let collected = std::thread::scope(|scope| {
        let observer = &mut *observer;
        std::thread::Builder::new()
            .name("volley-collector".into())
            .spawn_scoped(scope, move || {
                priority.apply();
                let mut collector = collector;
                let collected = collecting.collect(&mut collector, observer);
                (collector, collected)
            })
            .map(|handle| handle.join())
    });
    let (
        collector,
        Collected {
            warmup,
            elapsed,
            cpu,
            mut failure,
        },
    ) = match collected {
        Ok(Ok(done)) => done,
        not_collected => {
            // The workers stop at once; their figures have nowhere to go.
            shared.stop.store(true, std::sync::atomic::Ordering::SeqCst);
            handles.into_iter().for_each(|handle| drop(handle.join()));
            return Err(match not_collected {
                Err(err) => EngineError::Thread("the collecting thread", err),
                _ => EngineError::Worker("the collecting thread panicked".to_string()),
            });
        }
    };
    for handle in handles {
        if handle.join().is_err() {
            failure.get_or_insert_with(|| "a worker thread panicked".to_string());
        }
    }
    if let Some(message) = failure {
        return Err(EngineError::Worker(message));
    }
    let interrupted = shared.stop.load(std::sync::atomic::Ordering::Relaxed);
    Ok(RunResult {
        warmup,
        total: collector.total,
        series: collector.series,
        step_series: collector.step_series,
        target_exited: collector.monitor.as_ref().is_some_and(|m| m.target_exited),
        target_before: collector.monitor.as_ref().and_then(|m| m.target_before),
        elapsed,
        cpu,
        threads,
        interrupted,
        protocol: settled.name,
        io: plan.transport.io.backend.name(),
        h3_offer: shared.h3_offer.get().copied(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_split_is_exact() {
        let args = crate::cli::RunArgs {
            urls: vec!["http://127.0.0.1:9/".into()],
            connections: Some(7),
            threads: Some(3),
            ..test_args()
        };
        let plan = Plan::from_args(&args).unwrap();
        let total: u64 = (0..3)
            .map(|w| worker_limit(&plan, w, Some(1000), None).requests.unwrap())
            .sum();
        assert_eq!(total, 1000);
        let total: u64 = (0..3)
            .map(|w| worker_limit(&plan, w, Some(2), None).requests.unwrap())
            .sum();
        assert_eq!(total, 2);
    }

    fn test_args() -> crate::cli::RunArgs {
        use clap::Parser;
        match crate::cli::Cli::parse_from(["volley", "run", "http://127.0.0.1:9/"]).command {
            crate::cli::Command::Run(args) => *args,
            _ => unreachable!(),
        }
    }
}
