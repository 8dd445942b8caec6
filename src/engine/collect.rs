//! What the collecting thread does while a run lasts: it merges the
//! workers' messages, interval by interval, into the [`Collector`], and
//! feeds the [`Observer`] each finished row and a few times a second the
//! live view.

use super::{Observer, PhaseSummary, WorkerMsg};
use crate::collector::{Collector, FinishedRow};
use crate::recorder::Snapshot;
use crate::sys::CpuTime;
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// How often the collecting thread wakes to refresh the live view.
const TICK: Duration = Duration::from_millis(250);

/// Hands a newly finished row to the observer with its steps' rows, its
/// full snapshot and the totals up to it.
fn emit(finished: FinishedRow, observer: &mut dyn Observer) {
    observer.row(finished.row, finished.steps);
    observer.interval_snapshot(finished.snapshot, finished.total);
}

/// What the collecting thread is given: the workers' messages, where to
/// send each worker its spare snapshots, how many warm-ups to wait for, and
/// the measured start (for the live view's clock).
pub struct Collecting<'a> {
    pub rx: Receiver<WorkerMsg>,
    pub spares: Vec<Sender<Snapshot>>,
    pub warmups: usize,
    pub start: &'a OnceLock<Instant>,
    /// How long the workers may take in all before the run gives up on
    /// them (a script's callback that never returns holds its worker's
    /// thread, and LuaJIT cannot interrupt a compiled loop); `None`: wait.
    pub give_up_after: Option<Duration>,
}

/// What the collecting thread gathered besides the collector itself.
pub struct Collected {
    pub warmup: Option<PhaseSummary>,
    /// The longest worker's measured phase.
    pub elapsed: Duration,
    /// The workers' CPU time in the measured phase.
    pub cpu: CpuTime,
    /// A worker's report that it could not run.
    pub failure: Option<String>,
    /// The run gave up on workers that had not finished by
    /// `give_up_after`: their threads are left to end with the process.
    pub gave_up: bool,
}

impl Collecting<'_> {
    /// Merges the workers' messages until every worker is done, feeding
    /// `observer` each finished row and a few times a second the live view.
    /// Each snapshot a worker sends is answered with an empty one for its
    /// next swap (see [`Collector::spare`]).
    pub fn collect(self, collector: &mut Collector, observer: &mut dyn Observer) -> Collected {
        let mut warmup: Option<PhaseSummary> = None;
        let mut warmups_left = self.warmups;
        let mut elapsed = Duration::ZERO;
        let mut cpu = CpuTime::default();
        let mut failure = None;
        let began = Instant::now();
        let mut gave_up = false;
        loop {
            if self.give_up_after.is_some_and(|limit| began.elapsed() > limit) {
                gave_up = true;
                break;
            }
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
            gave_up,
        }
    }
}
