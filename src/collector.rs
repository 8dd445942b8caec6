//! Merges the workers' per-interval snapshots into the time series and the
//! run's totals.
//!
//! Workers send snapshots tagged with their interval index; a row is complete
//! once every worker still running has sent that index. Rows are emitted in
//! order, so the live log and the saved series agree.

use crate::histogram::IntervalHistogram;
use crate::monitor::{Monitor, ProcSample};
use crate::recorder::{Snapshot, Timings};
use crate::shape::LoadProfile;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// One row of the per-interval series (latencies in milliseconds).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SeriesRow {
    /// End of the interval, seconds since the measured start.
    pub t_s: f64,
    pub requests: u64,
    pub errors: u64,
    /// Responses by status class in the interval: 1xx, 2xx, 3xx, 4xx, 5xx.
    pub status_classes: [u64; 5],
    pub rps: f64,
    /// Mean latency of successful requests (for comparing runs).
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// The load asked for at the end of the interval: connections, or
    /// requests per second in the open model.
    pub load: f64,
    /// The watched target process at the end of the interval.
    pub target: Option<ProcSample>,
    /// volley itself at the end of the interval.
    pub tool: Option<ProcSample>,
    /// The interval's latency histogram of successful requests (as the
    /// run's: microseconds, V2 deflate, base64), so a merge of shards can
    /// recompute the interval's percentiles. Absent in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<IntervalHistogram>,
    /// Open model (`-R`) only: the interval's service time, from the actual
    /// send, to read beside the latency from the intended send above (the
    /// gap between them is the queueing). Absent in the closed model, where
    /// the two are the same, and in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceRow>,
}

/// One interval's service time (milliseconds). Four numbers, no histogram:
/// a second histogram per row would take an open-model report past its
/// 2 MB for a 10-minute run at 1 s intervals (measured at 1.33 MB, 0.93 MB
/// of it the rows' histograms), so a merge of shards cannot recompute these
/// and leaves them out.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct ServiceRow {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl ServiceRow {
    /// From the interval's service times.
    pub fn new(service: &Timings) -> ServiceRow {
        let pct = |q: f64| us_to_ms(service.quantile_us(q));
        ServiceRow {
            p50: pct(0.5),
            p90: pct(0.9),
            p99: pct(0.99),
            max: pct(1.0),
        }
    }
}

/// Microseconds (as recorded) to milliseconds (as reported).
pub fn us_to_ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl SeriesRow {
    /// `open_model`: requests had intended send times, so the service time
    /// differs from the latency and is kept too.
    fn from_snapshot(snap: &Snapshot, start_s: f64, end_s: f64, load: f64, open_model: bool) -> SeriesRow {
        let span = (end_s - start_s).max(1e-6);
        let pct = |q: f64| us_to_ms(snap.latency.quantile_us(q));
        SeriesRow {
            t_s: end_s,
            requests: snap.requests,
            errors: snap.error_count(),
            status_classes: std::array::from_fn(|class| {
                snap.status[(class + 1) * 100..(class + 2) * 100].iter().sum()
            }),
            rps: snap.requests as f64 / span,
            mean: if snap.latency.is_empty() {
                0.0
            } else {
                snap.latency.hist.mean() / 1000.0
            },
            p50: pct(0.5),
            p90: pct(0.9),
            p99: pct(0.99),
            max: pct(1.0),
            load,
            target: None,
            tool: None,
            histogram: Some(IntervalHistogram::new(&snap.latency.hist)),
            service: open_model.then(|| ServiceRow::new(&snap.service)),
        }
    }
}

/// A row the collector has just completed, with what it was made from,
/// lent to the caller's `on_row` for as long as the call lasts (nothing is
/// cloned for it: the run's totals alone are some 1 MB of histograms).
pub struct FinishedRow<'a> {
    pub row: &'a SeriesRow,
    /// The same interval's row of each scenario step.
    pub steps: &'a [SeriesRow],
    /// Everything recorded in the interval.
    pub snapshot: &'a Snapshot,
    /// Everything since the measured start, this interval included.
    pub total: &'a Snapshot,
}

/// A row still waiting for some workers.
struct PendingRow {
    snapshot: Snapshot,
    /// The latest end time any contribution reported.
    end_s: f64,
}

/// Where a worker stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// Has sent every index below this one.
    Sent(u64),
    /// Sent its final snapshot; contributes to no later row.
    Finished,
}

/// Builds the series and totals from worker snapshots.
///
/// Snapshots are recycled rather than allocated: the first snapshot of an
/// interval becomes its pending row, later ones are added into it, and
/// every snapshot the collector is done with is cleared into a pool that
/// [`Collector::spare`] hands back to the workers. A worker's swap once per
/// interval then costs no allocation on its own thread (allocating and
/// zeroing a fresh 1 MB snapshot there stalled its pacer by up to half a
/// millisecond per interval), and the collector's own work stays a few
/// adds and percentiles.
pub struct Collector {
    interval_s: f64,
    progress: Vec<Progress>,
    pending: BTreeMap<u64, PendingRow>,
    /// The next row to emit.
    next_row: u64,
    pub total: Snapshot,
    pub series: Vec<SeriesRow>,
    /// Scenarios: each step's own series, by step.
    pub step_series: Vec<Vec<SeriesRow>>,
    /// The planned load, for each row's target.
    profile: LoadProfile,
    /// Samples processes as rows complete.
    pub monitor: Option<Monitor>,
    /// The open model (`-R`): rows carry the service time too.
    pub open_model: bool,
    /// Cleared snapshots, ready to go back to the workers.
    pool: Vec<Snapshot>,
    /// Per-step snapshots a spare needs (the most any snapshot had).
    steps: usize,
}

impl Collector {
    pub fn new(workers: usize, interval: Duration, profile: LoadProfile) -> Collector {
        Collector {
            interval_s: interval.as_secs_f64(),
            progress: vec![Progress::Sent(0); workers],
            pending: BTreeMap::new(),
            next_row: 0,
            total: Snapshot::default(),
            series: Vec::new(),
            step_series: Vec::new(),
            profile,
            monitor: None,
            open_model: false,
            pool: Vec::new(),
            steps: 0,
        }
    }

    /// A full interval from one worker; `on_row` sees each row this
    /// completes, in order.
    pub fn interval(
        &mut self,
        worker: usize,
        index: u64,
        snapshot: Snapshot,
        on_row: &mut dyn FnMut(FinishedRow),
    ) {
        let end_s = (index + 1) as f64 * self.interval_s;
        self.add(index, snapshot, end_s);
        self.progress[worker] = Progress::Sent(index + 1);
        self.flush(on_row);
    }

    /// A worker's last, possibly partial, interval.
    pub fn finished(
        &mut self,
        worker: usize,
        index: u64,
        snapshot: Snapshot,
        elapsed: Duration,
        on_row: &mut dyn FnMut(FinishedRow),
    ) {
        self.add(index, snapshot, elapsed.as_secs_f64());
        self.progress[worker] = Progress::Finished;
        self.flush(on_row);
    }

    /// An empty snapshot for a worker's next swap: a recycled one when
    /// there is one.
    pub fn spare(&mut self) -> Snapshot {
        self.pool
            .pop()
            .unwrap_or_else(|| Snapshot::with_steps(self.steps))
    }

    /// Keeps a snapshot the collector is done with for a later
    /// [`Collector::spare`]; a pool of one per worker and two besides is
    /// all a run ever needs at once.
    fn recycle(&mut self, mut snapshot: Snapshot) {
        if self.pool.len() < self.progress.len() + 2 {
            snapshot.clear();
            self.pool.push(snapshot);
        }
    }

    fn add(&mut self, index: u64, snapshot: Snapshot, end_s: f64) {
        self.steps = self.steps.max(snapshot.steps.len());
        match self.pending.get_mut(&index) {
            Some(row) => {
                row.snapshot += &snapshot;
                row.end_s = row.end_s.max(end_s);
                self.recycle(snapshot);
            }
            None => {
                self.pending.insert(index, PendingRow { snapshot, end_s });
            }
        }
    }

    /// The planned load at the end of a row: just inside it, so a ramp's
    /// last value belongs to its last row, and rounded off float noise.
    fn load_at(&self, end_s: f64) -> f64 {
        let end = self
            .profile
            .duration()
            .map_or(end_s, |d| end_s.min(d.as_secs_f64()));
        let value = self.profile.value_at((end - 1e-9).max(0.0));
        (value * 1000.0).round() / 1000.0
    }

    /// Emits every row that no running worker can still add to.
    fn flush(&mut self, on_row: &mut dyn FnMut(FinishedRow)) {
        loop {
            let index = self.next_row;
            let complete = self.progress.iter().all(|p| match p {
                Progress::Sent(sent) => *sent > index,
                Progress::Finished => true,
            });
            if !complete {
                break;
            }
            let Some(row) = self.pending.remove(&index) else {
                // Everyone finished and nothing is left.
                if self.pending.is_empty() {
                    break;
                }
                self.next_row += 1;
                continue;
            };
            let start_s = index as f64 * self.interval_s;
            let load = self.load_at(row.end_s);
            let mut series_row =
                SeriesRow::from_snapshot(&row.snapshot, start_s, row.end_s, load, self.open_model);
            if let Some(monitor) = &mut self.monitor {
                (series_row.target, series_row.tool) = monitor.sample();
            }
            let steps = &row.snapshot.steps;
            if self.step_series.len() < steps.len() {
                self.step_series.resize_with(steps.len(), Vec::new);
            }
            let step_rows: Vec<SeriesRow> = steps
                .iter()
                .map(|step| SeriesRow::from_snapshot(step, start_s, row.end_s, load, self.open_model))
                .collect();
            for (series, step_row) in self.step_series.iter_mut().zip(&step_rows) {
                series.push(step_row.clone());
            }
            self.total.add_interval(&row.snapshot);
            self.series.push(series_row);
            let row_in_series = self.series.last().expect("pushed just above");
            on_row(FinishedRow {
                row: row_in_series,
                steps: &step_rows,
                snapshot: &row.snapshot,
                total: &self.total,
            });
            self.recycle(row.snapshot);
            self.next_row += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::Recorder;
    use crate::sample::{Outcome, Sample};

    /// What a finished row showed its caller: the row, and the requests of
    /// its interval and of the totals up to it.
    type Seen = Vec<(SeriesRow, u64, u64)>;

    fn interval(c: &mut Collector, worker: usize, index: u64, snapshot: Snapshot) -> Seen {
        let mut seen = Vec::new();
        c.interval(worker, index, snapshot, &mut |f| {
            seen.push((f.row.clone(), f.snapshot.requests, f.total.requests))
        });
        seen
    }

    fn finished(c: &mut Collector, worker: usize, index: u64, snapshot: Snapshot, elapsed: Duration) -> Seen {
        let mut seen = Vec::new();
        c.finished(worker, index, snapshot, elapsed, &mut |f| {
            seen.push((f.row.clone(), f.snapshot.requests, f.total.requests))
        });
        seen
    }

    fn snap(requests: u64) -> Snapshot {
        let mut rec = Recorder::default();
        for _ in 0..requests {
            rec.record(&Sample {
                latency_us: 1000,
                service_us: 1000,
                bytes: 1,
                outcome: Outcome::Ok { status: 200 },
            });
        }
        rec.take()
    }

    #[test]
    fn rows_wait_for_every_worker_and_come_in_order() {
        let mut c = Collector::new(2, Duration::from_secs(1), LoadProfile::constant(2.0));
        assert!(interval(&mut c, 0, 0, snap(10)).is_empty());
        assert!(interval(&mut c, 0, 1, snap(10)).is_empty());
        let rows = interval(&mut c, 1, 0, snap(5));
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].0.requests, 15);
        assert_eq!(rows[0].1, 15);
        assert_eq!(rows[0].2, 15);
        assert_eq!(rows[0].0.rps, 15.0);
        // Worker 1 ends half-way through interval 1.
        let rows = finished(&mut c, 1, 1, snap(2), Duration::from_millis(1500));
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].0.requests, 12);
        assert_eq!(rows[0].2, 27);
        let rows = finished(&mut c, 0, 2, snap(4), Duration::from_millis(2500));
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].0.t_s, rows[0].0.requests), (2.5, 4));
        assert!(
            (rows[0].0.rps - 8.0).abs() < 1e-9,
            "a half interval doubles the rate"
        );
        assert_eq!(c.total.requests, 31);
        assert_eq!(c.series.len(), 3);
    }

    #[test]
    fn latencies_are_reported_in_ms() {
        let mut c = Collector::new(1, Duration::from_secs(1), LoadProfile::constant(1.0));
        let rows = finished(&mut c, 0, 0, snap(3), Duration::from_secs(1));
        assert_eq!(rows[0].0.p50, 1.0);
        assert_eq!(rows[0].0.max, 1.0);
        assert_eq!(
            rows[0].0.service, None,
            "the closed model repeats no service time"
        );
    }

    #[test]
    fn open_model_rows_carry_the_service_time_beside_the_latency() {
        let mut rec = Recorder::default();
        // Each request waited 4 ms for its send and took 1-10 ms once sent.
        for service_ms in 1..=10u64 {
            rec.record(&Sample {
                latency_us: (service_ms + 4) * 1000,
                service_us: service_ms * 1000,
                bytes: 1,
                outcome: Outcome::Ok { status: 200 },
            });
        }
        let mut c = Collector::new(1, Duration::from_secs(1), LoadProfile::constant(10.0));
        c.open_model = true;
        let rows = finished(&mut c, 0, 0, rec.take(), Duration::from_secs(1));
        let row = &rows[0].0;
        let service = row.service.expect("an open-model row has its service time");
        // Within the histogram's 0.1% buckets.
        let near = |got: f64, want: f64| assert!((got - want).abs() <= want * 1e-3, "{got} vs {want}");
        near(service.p50, 5.0);
        near(service.p90, 9.0);
        near(service.max, 10.0);
        near(row.p50, 9.0);
        near(row.max, 14.0);
        assert_eq!(c.series[0].service, Some(service), "the saved series has it too");
    }

    #[test]
    fn snapshots_are_recycled_cleared_and_the_counts_stay_exact() {
        let mut c = Collector::new(2, Duration::from_secs(1), LoadProfile::constant(2.0));
        let mut seen = Seen::new();
        for index in 0..4 {
            seen.extend(interval(&mut c, 0, index, snap(3)));
            seen.extend(interval(&mut c, 1, index, snap(4)));
            // Each worker's next swap gets a snapshot back, empty.
            for _ in 0..2 {
                let spare = c.spare();
                assert_eq!(spare.requests, 0);
                assert!(spare.latency.is_empty(), "a recycled snapshot is cleared");
                c.recycle(spare);
            }
        }
        let counts: Vec<(u64, u64)> = seen
            .iter()
            .map(|(row, _, total)| (row.requests, *total))
            .collect();
        assert_eq!(counts, [(7, 7), (7, 14), (7, 21), (7, 28)]);
        assert!(!c.pool.is_empty(), "the pool refills from the merged snapshots");
        assert!(c.pool.len() <= 4, "and stays small: {}", c.pool.len());
    }
}
