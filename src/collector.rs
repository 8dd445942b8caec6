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

/// A row the collector has completed, with what it was made from.
pub struct FinishedRow {
    pub row: SeriesRow,
    /// Everything recorded in the interval.
    pub snapshot: Snapshot,
    /// Everything since the measured start, this interval included.
    pub total: Snapshot,
}

/// A row still waiting for some workers.
#[derive(Default)]
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
        }
    }

    /// A full interval from one worker.
    pub fn interval(&mut self, worker: usize, index: u64, snapshot: &Snapshot) -> Vec<FinishedRow> {
        let end_s = (index + 1) as f64 * self.interval_s;
        self.add(index, snapshot, end_s);
        self.progress[worker] = Progress::Sent(index + 1);
        self.flush()
    }

    /// A worker's last, possibly partial, interval.
    pub fn finished(
        &mut self,
        worker: usize,
        index: u64,
        snapshot: &Snapshot,
        elapsed: Duration,
    ) -> Vec<FinishedRow> {
        self.add(index, snapshot, elapsed.as_secs_f64());
        self.progress[worker] = Progress::Finished;
        self.flush()
    }

    fn add(&mut self, index: u64, snapshot: &Snapshot, end_s: f64) {
        let row = self.pending.entry(index).or_default();
        row.snapshot += snapshot;
        row.end_s = row.end_s.max(end_s);
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
    fn flush(&mut self) -> Vec<FinishedRow> {
        let mut emitted = Vec::new();
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
            for (series, step) in self.step_series.iter_mut().zip(steps) {
                series.push(SeriesRow::from_snapshot(
                    step,
                    start_s,
                    row.end_s,
                    load,
                    self.open_model,
                ));
            }
            self.total += &row.snapshot;
            self.series.push(series_row.clone());
            emitted.push(FinishedRow {
                row: series_row,
                snapshot: row.snapshot,
                total: self.total.clone(),
            });
            self.next_row += 1;
        }
        emitted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::Recorder;
    use crate::sample::{Outcome, Sample};

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
        assert!(c.interval(0, 0, &snap(10)).is_empty());
        assert!(c.interval(0, 1, &snap(10)).is_empty());
        let rows = c.interval(1, 0, &snap(5));
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].row.requests, 15);
        assert_eq!(rows[0].snapshot.requests, 15);
        assert_eq!(rows[0].total.requests, 15);
        assert_eq!(rows[0].row.rps, 15.0);
        // Worker 1 ends half-way through interval 1.
        let rows = c.finished(1, 1, &snap(2), Duration::from_millis(1500));
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].row.requests, 12);
        assert_eq!(rows[0].total.requests, 27);
        let rows = c.finished(0, 2, &snap(4), Duration::from_millis(2500));
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].row.t_s, rows[0].row.requests), (2.5, 4));
        assert!(
            (rows[0].row.rps - 8.0).abs() < 1e-9,
            "a half interval doubles the rate"
        );
        assert_eq!(c.total.requests, 31);
        assert_eq!(c.series.len(), 3);
    }

    #[test]
    fn latencies_are_reported_in_ms() {
        let mut c = Collector::new(1, Duration::from_secs(1), LoadProfile::constant(1.0));
        let rows = c.finished(0, 0, &snap(3), Duration::from_secs(1));
        assert_eq!(rows[0].row.p50, 1.0);
        assert_eq!(rows[0].row.max, 1.0);
        assert_eq!(
            rows[0].row.service, None,
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
        let rows = c.finished(0, 0, &rec.take(), Duration::from_secs(1));
        let row = &rows[0].row;
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
}
