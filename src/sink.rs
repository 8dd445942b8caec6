//! Where a run's results go besides the terminal and the report files: the
//! live dashboard and the metric outputs.
//!
//! Results leave a run at one point, the collector's per-interval stream
//! (`ARCHITECTURE.md`): every sink is an [`Observer`] of it, so the
//! terminal view, the outputs and the final report agree by construction.
//! Sinks run on the collecting thread, once per interval, never per request;
//! one that talks to the network must hand its work to its own thread through
//! a bounded queue and never block the run.

use crate::collector::SeriesRow;
use crate::engine::{Observer, PhaseSummary};
use crate::plan::Plan;
use crate::recorder::Snapshot;
use crate::report::{Report, RunReport};
use std::time::Duration;

pub mod dashboard;
pub mod endpoint;
pub mod metrics;
pub mod stream;

/// What the command line asked for beyond the terminal and the report files.
#[derive(Clone, Debug, Default)]
pub struct SinkSpec {
    /// `--dashboard`: serve the live page here.
    pub dashboard: Option<std::net::SocketAddr>,
    /// `--run-id`, `--tag`, `--out` and `--metrics-addr`.
    pub metrics: metrics::MetricsSpec,
    /// `--stream`: the intervals as JSON lines, for a live merge.
    pub stream: Option<stream::Destination>,
    /// Where the sinks' own threads run (set from the run's load model).
    pub priority: crate::sys::ThreadPriority,
}

/// A run about to start: one URL of `volley run` or a plan, or one level of
/// `volley step`.
pub struct RunStart<'a> {
    /// Its position in the invocation (0 for the first URL or level).
    pub index: usize,
    pub url: &'a str,
    pub plan: &'a Plan,
    /// `volley step`: the level of load of this run.
    pub level: Option<f64>,
}

/// The planned length of one run: its duration, or its stages' total.
pub fn planned_seconds(plan: &Plan) -> Option<f64> {
    plan.stop.duration.map(|d| d.as_secs_f64()).or_else(|| {
        plan.load
            .stages
            .as_ref()
            .map(|stages| stages.iter().map(|s| s.duration.as_secs_f64()).sum())
    })
}

/// A destination for results: fed every interval as an [`Observer`], and
/// told where each run starts and ends and when the invocation is over.
pub trait Sink: Observer {
    fn run_started(&mut self, _run: &RunStart) {}
    fn run_finished(&mut self, _run: &RunReport) {}
    /// The invocation is over; the report is final but for what the sinks
    /// add about themselves (a metric output's dropped batches). A sink
    /// flushes what it still holds here, within a bounded time.
    fn finished(&mut self, _report: &mut Report) {}
}

/// Why a sink could not start: nothing was sent yet.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The address of `--dashboard` or `--metrics-addr` cannot be served;
    /// `hint` says what to give instead.
    #[error("cannot serve {served} on {addr} ({hint})")]
    Bind {
        served: &'static str,
        addr: std::net::SocketAddr,
        hint: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The bound socket would not say its address.
    #[error("{0}")]
    Address(&'static str, #[source] std::io::Error),
    #[error("{0}: cannot start its runtime")]
    Runtime(&'static str, #[source] std::io::Error),
    /// `label` names whose thread it is.
    #[error("{label}: cannot start its thread")]
    Thread {
        label: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the stream to {0}")]
    StreamFile(String, #[source] std::io::Error),
}

/// The sinks of one invocation.
#[derive(Default)]
pub struct Sinks {
    sinks: Vec<Box<dyn Sink>>,
    /// Recorded in the report when the invocation ends.
    run_id: Option<String>,
}

impl Sinks {
    /// Starts the sinks the command line asked for, for the runs of `plan`.
    pub fn start(spec: &SinkSpec, plan: &Plan) -> Result<Sinks, SinkError> {
        let mut sinks = Sinks::default();
        if let Some(addr) = spec.dashboard {
            sinks.push(Box::new(dashboard::Dashboard::start(addr, spec.priority)?));
        }
        if spec.metrics.any() {
            sinks.push(Box::new(metrics::Metrics::start(&spec.metrics, spec.priority)?));
        }
        // Last: its end line carries the report with what the others added.
        if let Some(destination) = &spec.stream {
            sinks.push(Box::new(stream::Stream::start(destination, plan, spec.priority)?));
        }
        sinks.run_id = Some(spec.metrics.run_id.clone()).filter(|id| !id.is_empty());
        Ok(sinks)
    }

    pub fn push(&mut self, sink: Box<dyn Sink>) {
        self.sinks.push(sink);
    }

    pub fn run_started(&mut self, run: &RunStart) {
        self.sinks.iter_mut().for_each(|s| s.run_started(run));
    }

    pub fn run_finished(&mut self, run: &RunReport) {
        self.sinks.iter_mut().for_each(|s| s.run_finished(run));
    }

    /// Records the run id in the report and lets every sink finish.
    pub fn finished(&mut self, report: &mut Report) {
        report.run_id = self.run_id.clone();
        self.sinks.iter_mut().for_each(|s| s.finished(report));
    }

    /// An observer that feeds `first` (the terminal view) and then every sink.
    pub fn with<'a>(&'a mut self, first: &'a mut dyn Observer) -> Fanout<'a> {
        Fanout { first, sinks: self }
    }
}

/// Forwards each observation to the terminal view, then to every sink.
pub struct Fanout<'a> {
    first: &'a mut dyn Observer,
    sinks: &'a mut Sinks,
}

impl Observer for Fanout<'_> {
    fn warmup_done(&mut self, warmup: &PhaseSummary) {
        self.first.warmup_done(warmup);
        self.sinks.sinks.iter_mut().for_each(|s| s.warmup_done(warmup));
    }

    fn row(&mut self, row: &SeriesRow, steps: &[SeriesRow]) {
        self.first.row(row, steps);
        self.sinks.sinks.iter_mut().for_each(|s| s.row(row, steps));
    }

    fn interval_snapshot(&mut self, interval: &Snapshot, total: &Snapshot) {
        self.first.interval_snapshot(interval, total);
        self.sinks
            .sinks
            .iter_mut()
            .for_each(|s| s.interval_snapshot(interval, total));
    }

    fn tick(&mut self, elapsed: Duration, so_far: &Snapshot, last: Option<&SeriesRow>) {
        self.first.tick(elapsed, so_far, last);
        self.sinks
            .sinks
            .iter_mut()
            .for_each(|s| s.tick(elapsed, so_far, last));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::Recorder;
    use crate::sample::{Outcome, Sample};

    /// Counts what reaches it.
    #[derive(Default)]
    struct Counting {
        rows: usize,
        requests_seen: u64,
        total_seen: u64,
    }

    impl Observer for Counting {
        fn row(&mut self, _row: &SeriesRow, _steps: &[SeriesRow]) {
            self.rows += 1;
        }
        fn interval_snapshot(&mut self, interval: &Snapshot, total: &Snapshot) {
            self.requests_seen += interval.requests;
            self.total_seen = total.requests;
        }
    }

    /// Shares its counts with the test through a pointer it does not own.
    struct Probe(std::sync::Arc<std::sync::Mutex<Counting>>);
    impl Observer for Probe {
        fn row(&mut self, row: &SeriesRow, steps: &[SeriesRow]) {
            self.0.lock().unwrap().row(row, steps);
        }
        fn interval_snapshot(&mut self, interval: &Snapshot, total: &Snapshot) {
            self.0.lock().unwrap().interval_snapshot(interval, total);
        }
    }
    impl Sink for Probe {}

    #[test]
    fn fanout_feeds_the_terminal_view_and_every_sink() {
        let mut rec = Recorder::default();
        for _ in 0..3 {
            rec.record(&Sample {
                latency_us: 100,
                service_us: 100,
                bytes: 1,
                outcome: Outcome::Ok { status: 200 },
            });
        }
        let snap = rec.take();
        let probes: Vec<_> = (0..2).map(|_| std::sync::Arc::default()).collect();
        let mut sinks = Sinks::default();
        for p in &probes {
            sinks.push(Box::new(Probe(std::sync::Arc::clone(p))));
        }
        let mut collector = crate::collector::Collector::new(
            1,
            Duration::from_secs(1),
            crate::shape::LoadProfile::constant(1.0),
        );
        let mut terminal = Counting::default();
        {
            let mut fan = sinks.with(&mut terminal);
            collector.finished(0, 0, snap, Duration::from_secs(1), &mut |finished| {
                fan.row(finished.row, &[]);
                fan.interval_snapshot(finished.snapshot, finished.total);
            });
        }
        assert_eq!((terminal.rows, terminal.requests_seen), (1, 3));
        for p in &probes {
            let seen = p.lock().unwrap();
            assert_eq!((seen.rows, seen.requests_seen, seen.total_seen), (1, 3, 3));
        }
    }
}
