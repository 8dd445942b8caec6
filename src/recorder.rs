//! Per-worker recording of samples into histograms and counters.
//!
//! Each worker owns one [`Recorder`] (no lock, no atomics) and swaps a
//! [`Snapshot`] out of it once per sampling interval. Snapshots merge with
//! `+=`, so the collector can build the time series and the totals without
//! ever holding individual samples: memory does not grow with requests.

use crate::sample::{ErrorKind, Outcome, RequestError, Sample};
use hdrhistogram::Histogram;
use std::ops::AddAssign;

/// Latencies are recorded in microseconds with 3 significant digits, from
/// 1 µs up to one hour (values above are clamped): exact to the microsecond
/// below ~2 ms, and to 0.1% above, which is what percentiles need.
pub const LATENCY_MAX_US: u64 = 3_600_000_000;

/// Status codes are counted in a flat array indexed by code.
const STATUS_SLOTS: usize = 600;

/// Creates the latency histogram every recorder and report uses.
pub fn new_latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("static histogram bounds are valid")
}

/// Counters and histograms for a span of a run; merged by `+=`.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Requests finished (successfully or not).
    pub requests: u64,
    /// Requests answered with an expected status.
    pub ok: u64,
    /// Failed requests, indexed by `ErrorKind as usize`.
    pub errors: [u64; ErrorKind::COUNT],
    /// Response bytes read.
    pub bytes: u64,
    /// Responses by status code (expected or not).
    pub status: Box<[u64; STATUS_SLOTS]>,
    /// Latency of successful requests, in microseconds.
    pub latency: Histogram<u64>,
    /// Exact extremes of `latency` (the histogram rounds them to its
    /// buckets); `min_us` is `u64::MAX` while nothing was recorded.
    pub min_us: u64,
    pub max_us: u64,
    /// The first message seen for each error kind, as an example.
    pub error_examples: [Option<String>; ErrorKind::COUNT],
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            requests: 0,
            ok: 0,
            errors: [0; ErrorKind::COUNT],
            bytes: 0,
            status: Box::new([0; STATUS_SLOTS]),
            latency: new_latency_histogram(),
            min_us: u64::MAX,
            max_us: 0,
            error_examples: Default::default(),
        }
    }
}

impl Snapshot {
    /// Total failed requests of every kind.
    pub fn error_count(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// A latency quantile in microseconds, within the exact extremes
    /// (0 when nothing was recorded).
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.latency.is_empty() {
            return 0;
        }
        self.latency.value_at_quantile(q).clamp(self.min_us, self.max_us)
    }

    /// Non-zero status counts, in code order.
    pub fn status_counts(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| (code as u16, *n))
    }

    /// Non-zero error counts with their example messages.
    pub fn error_kinds(&self) -> impl Iterator<Item = (ErrorKind, u64, Option<&str>)> + '_ {
        ErrorKind::ALL.iter().filter_map(|kind| {
            let n = self.errors[*kind as usize];
            (n > 0).then(|| (*kind, n, self.error_examples[*kind as usize].as_deref()))
        })
    }
}

impl AddAssign<&Snapshot> for Snapshot {
    fn add_assign(&mut self, other: &Snapshot) {
        self.requests += other.requests;
        self.ok += other.ok;
        self.bytes += other.bytes;
        for (mine, theirs) in self.errors.iter_mut().zip(other.errors.iter()) {
            *mine += theirs;
        }
        for (mine, theirs) in self.status.iter_mut().zip(other.status.iter()) {
            *mine += theirs;
        }
        // Both histograms share the same bounds, so adding cannot fail.
        self.latency
            .add(&other.latency)
            .expect("histograms with equal bounds merge");
        self.min_us = self.min_us.min(other.min_us);
        self.max_us = self.max_us.max(other.max_us);
        for (mine, theirs) in self.error_examples.iter_mut().zip(other.error_examples.iter()) {
            if mine.is_none() {
                mine.clone_from(theirs);
            }
        }
    }
}

/// A worker's recorder: records samples, hands out snapshots.
#[derive(Default)]
pub struct Recorder {
    current: Snapshot,
}

impl Recorder {
    /// Records one finished request. Never allocates.
    pub fn record(&mut self, sample: &Sample) {
        let snap = &mut self.current;
        snap.requests += 1;
        snap.bytes += sample.bytes;
        match sample.outcome {
            Outcome::Ok { status } => {
                snap.ok += 1;
                snap.status[usize::from(status).min(STATUS_SLOTS - 1)] += 1;
                let us = sample.latency_us.clamp(1, LATENCY_MAX_US);
                snap.latency.saturating_record(us);
                snap.min_us = snap.min_us.min(us);
                snap.max_us = snap.max_us.max(us);
            }
            Outcome::BadStatus { status } => {
                snap.status[usize::from(status).min(STATUS_SLOTS - 1)] += 1;
                snap.errors[ErrorKind::Status as usize] += 1;
            }
            Outcome::Failed(kind) => snap.errors[kind as usize] += 1,
        }
    }

    /// Keeps the first message of each error kind per interval; later
    /// errors of the same kind cost nothing.
    pub fn note_error(&mut self, err: &RequestError) {
        let slot = &mut self.current.error_examples[err.kind as usize];
        if slot.is_none() {
            *slot = Some(err.message());
        }
    }

    /// Whether an example for this kind is still wanted (so the caller can
    /// skip building one).
    pub fn wants_example(&self, kind: ErrorKind) -> bool {
        self.current.error_examples[kind as usize].is_none()
    }

    /// Swaps out what was recorded since the last call.
    pub fn take(&mut self) -> Snapshot {
        std::mem::take(&mut self.current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::ErrorDetail;

    fn ok(latency_us: u64) -> Sample {
        Sample {
            latency_us,
            bytes: 10,
            outcome: Outcome::Ok { status: 200 },
        }
    }

    #[test]
    fn records_and_swaps_out() {
        let mut rec = Recorder::default();
        rec.record(&ok(100));
        rec.record(&ok(300));
        rec.record(&Sample {
            latency_us: 5,
            bytes: 0,
            outcome: Outcome::Failed(ErrorKind::Timeout),
        });
        let snap = rec.take();
        assert_eq!(snap.requests, 3);
        assert_eq!(snap.ok, 2);
        assert_eq!(snap.errors[ErrorKind::Timeout as usize], 1);
        assert_eq!(
            snap.latency.len(),
            2,
            "failures stay out of the latency histogram"
        );
        assert_eq!((snap.min_us, snap.max_us), (100, 300));
        assert_eq!(rec.take().requests, 0, "take leaves an empty recorder behind");
    }

    #[test]
    fn bad_status_counts_as_status_error_and_in_breakdown() {
        let mut rec = Recorder::default();
        rec.record(&Sample {
            latency_us: 10,
            bytes: 50,
            outcome: Outcome::BadStatus { status: 500 },
        });
        let snap = rec.take();
        assert_eq!(snap.errors[ErrorKind::Status as usize], 1);
        assert_eq!(snap.status_counts().collect::<Vec<_>>(), vec![(500, 1)]);
        assert_eq!(snap.ok, 0);
    }

    #[test]
    fn merge_adds_everything_and_keeps_first_example() {
        let mut a = Recorder::default();
        a.record(&ok(100));
        a.note_error(&RequestError::new(ErrorKind::Reset, ErrorDetail::Static("first")));
        let mut b = Recorder::default();
        b.record(&ok(200));
        b.record(&ok(200));
        b.note_error(&RequestError::new(
            ErrorKind::Reset,
            ErrorDetail::Static("second"),
        ));
        let mut total = a.take();
        total += &b.take();
        assert_eq!(total.requests, 3);
        assert_eq!(total.bytes, 30);
        assert_eq!(total.latency.len(), 3);
        assert_eq!(total.status[200], 3);
        assert_eq!(
            total.error_examples[ErrorKind::Reset as usize].as_deref(),
            Some("first")
        );
    }

    #[test]
    fn huge_latencies_are_clamped_not_lost() {
        let mut rec = Recorder::default();
        rec.record(&ok(u64::MAX / 2));
        let snap = rec.take();
        assert_eq!(snap.latency.len(), 1);
        assert!(snap.latency.max() >= LATENCY_MAX_US / 2);
    }
}
