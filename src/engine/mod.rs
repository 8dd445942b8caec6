//! Runs one target of a plan: settles its protocol, starts the workers,
//! merges what they report, and returns the measured totals and series.
//!
//! The run goes in stages, each its own: [`protocol::settle`] picks the
//! protocol once, and with it the [`Wire`] every worker is built for
//! (nothing on the request path asks again); [`Shared`] holds what the
//! workers share, the [`Workload`] among it; `spawn` starts the workers
//! with their share of the plan; `collect` merges their intervals while
//! the run lasts; the end joins them and hands back a [`RunResult`].
//!
//! The caller watches the run through an [`Observer`] (the live view and the
//! per-interval log); the engine itself prints nothing.

mod batching;
pub mod budget;
mod collect;
pub mod connection;
mod deadline;
pub mod driver;
pub mod exchange;
mod fast_path;
pub mod feed;
mod h1;
pub mod iteration;
mod lean_h1;
mod lean_h2;
mod multiplexed;
pub mod protocol;
mod race;
pub mod script;
mod spawn;
pub mod timer;
pub mod users;
pub mod worker;

use crate::collector::{Collector, SeriesRow};
use crate::plan::{Plan, StatusSet};
use crate::recorder::Snapshot;
use crate::request::{Fields, Overrides, Request};
use crate::scenario::Scenario;
pub use crate::shape::LoadModel;
use crate::sys::CpuTime;
use crate::target::Target;
use crate::tls::TlsSetup;
use collect::{Collected, Collecting};
use exchange::Wire;
use fast_path::FastPath;
pub use protocol::Protocol;
use protocol::Settled;
use spawn::Workers;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};
use thiserror::Error;

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

/// What a run's requests are: the kind of exchange its loops make.
pub enum Workload<R> {
    /// The run's one request, encoded once before the run as its protocol
    /// sends it: what the fast paths send.
    Fixed(R),
    /// A plan file's flow: each iteration walks its steps, each request
    /// rendered for its send.
    Flow(Arc<Scenario>),
    /// A wrk script that makes a call per request: each worker's state
    /// (in [`Shared::script`]) writes its rounds.
    Script,
    /// Virtual users of a script (in [`Shared::users`]): each loop is one
    /// VU, each ticket one of its iterations.
    Users,
}

impl<R> Workload<R> {
    /// The run's one request, where the workload is one.
    pub fn fixed(&self) -> Option<&R> {
        match self {
            Workload::Fixed(request) => Some(request),
            Workload::Flow(_) | Workload::Script | Workload::Users => None,
        }
    }

    /// How many steps' statistics the workload keeps besides the totals.
    pub fn steps(&self) -> usize {
        match self {
            // A VU script's names are met while it runs.
            Workload::Fixed(_) | Workload::Script | Workload::Users => 0,
            Workload::Flow(scenario) => scenario.stat_names.len(),
        }
    }
}

/// What every worker of a run shares, read-only.
pub struct Shared<W: Wire> {
    pub target: Target,
    /// What the run's requests are.
    pub workload: Workload<W::Request>,
    /// A script run's script: its workers' states, and the addresses its
    /// `setup()` gave them.
    pub script: Option<Arc<crate::script::Script>>,
    /// A VU run's script and the run's names.
    pub users: Option<Arc<crate::vu::Users>>,
    /// What the protocol needs for the whole run besides its request.
    pub setup: W::Setup,
    /// The plan's transport settings as they are: timeouts, keep-alive,
    /// pipelining, HTTP/2 streams per connection (request loops per
    /// connection; 1 for HTTP/1.1).
    pub transport: crate::plan::Transport,
    pub success: StatusSet,
    pub model: LoadModel,
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

impl<W: Wire> Shared<W> {
    /// What the workers of `plan` against `target` share, in the protocol
    /// `settled` on: the run's request encoded once, when it has one.
    fn new(
        plan: &Plan,
        target: &Target,
        settled: &Settled,
        stop: Arc<AtomicBool>,
    ) -> Result<Self, EngineError> {
        let workload = match (&plan.request.scenario, &plan.request.script) {
            _ if plan.request.users.is_some() => Workload::Users,
            (Some(scenario), _) => Workload::Flow(scenario.clone()),
            (None, Some(script)) => match script.fixed_request() {
                Some(text) => Workload::Fixed(fixed_script_request::<W>(text, target, &plan.transport)?),
                None => Workload::Script,
            },
            (None, None) => {
                let asked = &plan.request;
                let fields = Fields::of(&asked.headers);
                let overrides = Overrides::of(asked.headers.iter().map(|(name, _)| name.as_str()));
                let path = target.path_and_query.as_bytes();
                let request = Request::to(target, &asked.method, path, &fields, overrides, &asked.body);
                Workload::Fixed(W::encode(&request, &plan.transport)?)
            }
        };
        Ok(Shared {
            target: target.clone(),
            workload,
            script: plan.request.script.clone(),
            users: plan.request.users.clone(),
            setup: W::setup(settled)?,
            transport: plan.transport.clone(),
            success: plan.request.success.clone(),
            model: plan.load.model(),
            tls: settled.tls.clone(),
            interval: plan.reporting.interval,
            stop,
            barrier: Barrier::new(plan.load.threads),
            start: OnceLock::new(),
            h3_offer: OnceLock::new(),
        })
    }

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

/// How long a script run's (wrk's or VUs') workers may take in all: the warm-up and the
/// measured phase, a request timeout and a few seconds more. Other
/// workloads never hold a worker's thread, and a run bounded by a request
/// count alone has no length to bound them by.
fn give_up_after<R>(plan: &Plan, workload: &Workload<R>) -> Option<Duration> {
    if !matches!(workload, Workload::Script | Workload::Users) {
        return None;
    }
    let warmup = match plan.stop.warmup {
        Some(crate::plan::Warmup::Duration(d)) => d,
        Some(crate::plan::Warmup::Requests(_)) => return None,
        None => Duration::ZERO,
    };
    Some(warmup + plan.stop.duration? + plan.transport.timeout + Duration::from_secs(5))
}

/// The one request of a script that makes no call per request, encoded as
/// any run's one request is.
fn fixed_script_request<W: Wire>(
    text: &[u8],
    target: &Target,
    transport: &crate::plan::Transport,
) -> Result<W::Request, EngineError> {
    let mut read = crate::script::RequestText::default();
    read.read(text)
        .map_err(|e| EngineError::Worker(format!("the script's request is {e}")))?;
    let mut fields = Fields::default();
    W::encode(&read.request(0, target, &mut fields), transport)
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

/// Runs the plan against one target.
pub fn run(
    plan: &Plan,
    target: &Target,
    stop: Arc<AtomicBool>,
    observer: &mut dyn Observer,
) -> Result<RunResult, EngineError> {
    let settled = protocol::settle(plan, target)?;
    // The one place that names each protocol: the rest of the run is built
    // for the one settled on.
    match settled.protocol {
        Protocol::Http1 => run_on::<h1::H1>(plan, target, settled, stop, observer),
        Protocol::Http2 => run_on::<multiplexed::H2>(plan, target, settled, stop, observer),
        Protocol::Http3 => run_on::<multiplexed::H3>(plan, target, settled, stop, observer),
    }
}

/// Runs the plan against one target over the protocol `W`.
fn run_on<W: FastPath>(
    plan: &Plan,
    target: &Target,
    settled: Settled,
    stop: Arc<AtomicBool>,
    observer: &mut dyn Observer,
) -> Result<RunResult, EngineError> {
    let shared = Arc::new(Shared::<W>::new(plan, target, &settled, stop)?);
    let threads = plan.load.threads;
    let mut collector = Collector::new(
        threads,
        plan.reporting.interval,
        shared.model.profile(plan.load.connections),
    );
    collector.open_model = shared.model.is_open();
    collector.monitor = Some(crate::monitor::Monitor::new(plan.watch.monitor_pid)?);
    let Workers { handles, rx, spares } = Workers::spawn(plan, &shared)?;
    let collecting = Collecting {
        rx,
        spares,
        warmups: if plan.stop.warmup.is_some() { threads } else { 0 },
        start: &shared.start,
        give_up_after: give_up_after(plan, &shared.workload),
    };
    // In the open model the collecting thread runs in the background, so
    // its per-interval work never takes a core from a worker and delays the
    // schedule (see `ThreadPriority`).
    let priority = crate::sys::ThreadPriority::for_model(shared.model.is_open());
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
            gave_up,
        },
    ) = match collected {
        Ok(Ok(done)) => done,
        not_collected => {
            // The workers stop at once; their figures have nowhere to go.
            shared.stop.store(true, Ordering::SeqCst);
            handles.into_iter().for_each(|handle| drop(handle.join()));
            return Err(match not_collected {
                Err(err) => EngineError::Thread("the collecting thread", err),
                _ => EngineError::Worker("the collecting thread panicked".to_string()),
            });
        }
    };
    if gave_up {
        // The workers still running are left (not joined) to end with the
        // process: one is held by a script that does not return.
        shared.stop.store(true, Ordering::SeqCst);
        return Err(EngineError::Worker(
            "a script callback did not return by the end of the run (is there an endless loop in request(), response() or delay()?)"
                .to_string(),
        ));
    }
    for handle in handles {
        if handle.join().is_err() {
            failure.get_or_insert_with(|| "a worker thread panicked".to_string());
        }
    }
    if let Some(message) = failure {
        return Err(EngineError::Worker(message));
    }
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
        interrupted: shared.stop.load(Ordering::Relaxed),
        protocol: settled.name,
        io: plan.transport.io.backend.name(),
        h3_offer: shared.h3_offer.get().copied(),
    })
}

#[cfg(test)]
mod tests {
    use super::spawn::worker_limit;
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
        let crate::cli::Command::Run(args) =
            crate::cli::Cli::parse_from(["volley", "run", "http://127.0.0.1:9/"]).command
        else {
            panic!("`volley run` parses as the run command");
        };
        *args
    }
}
