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
/// HTTP/1.1 and HTTP/2 status codes have three digits, so every code a
/// server can send has its own slot.
const STATUS_SLOTS: usize = 1000;

/// Whole microseconds of `d`.
fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Creates the latency histogram every recorder and report uses.
pub fn new_latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("static histogram bounds are valid")
}

/// A latency distribution: the HDR histogram plus its exact extremes (the
/// histogram rounds them to its buckets).
#[derive(Clone, Debug)]
pub struct Timings {
    /// Microseconds.
    pub hist: Histogram<u64>,
    /// `u64::MAX` while nothing was recorded.
    pub min_us: u64,
    pub max_us: u64,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            hist: new_latency_histogram(),
            min_us: u64::MAX,
            max_us: 0,
        }
    }
}

impl Timings {
    #[inline]
    pub fn record(&mut self, us: u64) {
        let us = us.clamp(1, LATENCY_MAX_US);
        self.hist.saturating_record(us);
        self.min_us = self.min_us.min(us);
        self.max_us = self.max_us.max(us);
    }

    /// A quantile in microseconds, within the exact extremes (0 when empty).
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.hist.is_empty() {
            return 0;
        }
        self.hist.value_at_quantile(q).clamp(self.min_us, self.max_us)
    }

    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Empties it, keeping its memory.
    pub fn clear(&mut self) {
        // An empty histogram's counts are all zero already: skip the pass
        // over its some 23,000 counts (most of a snapshot's are empty).
        if !self.hist.is_empty() {
            self.hist.reset();
        }
        self.min_us = u64::MAX;
        self.max_us = 0;
    }
}

impl AddAssign<&Timings> for Timings {
    fn add_assign(&mut self, other: &Timings) {
        // Adding an empty histogram would still pass over all its counts.
        if other.hist.is_empty() {
            return;
        }
        // Both histograms share the same bounds, so adding cannot fail.
        self.hist
            .add(&other.hist)
            .expect("histograms with equal bounds merge");
        self.min_us = self.min_us.min(other.min_us);
        self.max_us = self.max_us.max(other.max_us);
    }
}

/// How well the open model kept its schedule.
#[derive(Clone, Debug, Default)]
pub struct Pacing {
    /// Requests sent (their send delay recorded).
    pub sent: u64,
    /// Sent 1 ms or more after their intended time.
    pub late: u64,
    /// Of those, the ones that had waited for a free connection.
    pub late_waiting_for_connection: u64,
    /// Largest delay from intended to actual send, in microseconds.
    pub max_delay_us: u64,
    /// How late the pacer itself woke for each ticket: the tool's own lag.
    pub pacer_lag: Timings,
}

impl Pacing {
    /// Empties it, keeping its memory.
    pub fn clear(&mut self) {
        let Pacing {
            sent,
            late,
            late_waiting_for_connection,
            max_delay_us,
            pacer_lag,
        } = self;
        (*sent, *late, *late_waiting_for_connection, *max_delay_us) = (0, 0, 0, 0);
        pacer_lag.clear();
    }
}

/// A send this much after its intended time counts as late.
pub const LATE_US: u64 = 1000;

impl AddAssign<&Pacing> for Pacing {
    fn add_assign(&mut self, other: &Pacing) {
        self.sent += other.sent;
        self.late += other.late;
        self.late_waiting_for_connection += other.late_waiting_for_connection;
        self.max_delay_us = self.max_delay_us.max(other.max_delay_us);
        self.pacer_lag += &other.pacer_lag;
    }
}

/// TLS handshakes completed and how long each took, from TCP connected to
/// handshake done.
#[derive(Clone, Debug, Default)]
pub struct Handshakes {
    pub count: u64,
    /// Of those, the ones that resumed an earlier session (no certificate
    /// exchange, less work for both sides).
    pub resumed: u64,
    /// QUIC with `--0rtt`: connections whose first requests went out as
    /// 0-RTT early data, and those of them the server took.
    pub zero_rtt_tried: u64,
    pub zero_rtt_accepted: u64,
    pub time: Timings,
}

impl Handshakes {
    /// Empties it, keeping its memory.
    pub fn clear(&mut self) {
        self.count = 0;
        self.resumed = 0;
        self.zero_rtt_tried = 0;
        self.zero_rtt_accepted = 0;
        self.time.clear();
    }
}

impl AddAssign<&Handshakes> for Handshakes {
    fn add_assign(&mut self, other: &Handshakes) {
        self.count += other.count;
        self.resumed += other.resumed;
        self.zero_rtt_tried += other.zero_rtt_tried;
        self.zero_rtt_accepted += other.zero_rtt_accepted;
        self.time += &other.time;
    }
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
    /// Latency of successful requests from their intended send time (the
    /// actual send in the closed model).
    pub latency: Timings,
    /// Latency of successful requests from their actual send.
    pub service: Timings,
    /// How fast failures (errors and unexpected statuses) came back: a
    /// refusal in microseconds and a timeout after seconds fail differently.
    pub failures: Timings,
    /// Open model only: how well the schedule held.
    pub pacing: Pacing,
    /// `https://` only: the TLS handshakes of new connections.
    pub handshakes: Handshakes,
    /// Scenarios: one snapshot per named plan item (empty otherwise).
    pub steps: Vec<Snapshot>,
    /// The first message seen for each error kind, as an example.
    pub error_examples: [Option<String>; ErrorKind::COUNT],
    /// How long the target refused connections (its connects failed, one
    /// after another until one succeeded) in this span, in microseconds.
    /// The workers of one interval were refused at the same time: merged,
    /// the longest stands for all of them, and the collector adds the
    /// intervals up ([`Snapshot::add_interval`]).
    pub refused_us: u64,
    /// A VU script's checks by index (see `vu::Names`): how many held and
    /// how many failed.
    pub checks: Vec<[u64; 2]>,
    /// A VU script's iterations finished (with or without an error).
    pub iterations: u64,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            requests: 0,
            ok: 0,
            errors: [0; ErrorKind::COUNT],
            bytes: 0,
            status: Box::new([0; STATUS_SLOTS]),
            latency: Timings::default(),
            service: Timings::default(),
            failures: Timings::default(),
            pacing: Pacing::default(),
            handshakes: Handshakes::default(),
            steps: Vec::new(),
            error_examples: Default::default(),
            refused_us: 0,
            checks: Vec::new(),
            iterations: 0,
        }
    }
}

impl Snapshot {
    /// An empty snapshot with room for `steps` per-step snapshots.
    pub fn with_steps(steps: usize) -> Snapshot {
        Snapshot {
            steps: (0..steps).map(|_| Snapshot::default()).collect(),
            ..Snapshot::default()
        }
    }

    /// Empties it for reuse, keeping its memory (the histograms' counts,
    /// the per-step snapshots), so a recycled snapshot costs a memset
    /// rather than an allocation of some 1 MB.
    pub fn clear(&mut self) {
        let Snapshot {
            requests,
            ok,
            errors,
            bytes,
            status,
            latency,
            service,
            failures,
            pacing,
            handshakes,
            steps,
            error_examples,
            refused_us,
            checks,
            iterations,
        } = self;
        (*requests, *ok, *bytes, *refused_us, *iterations) = (0, 0, 0, 0, 0);
        checks.fill([0, 0]);
        errors.fill(0);
        status.fill(0);
        latency.clear();
        service.clear();
        failures.clear();
        pacing.clear();
        handshakes.clear();
        steps.iter_mut().for_each(Snapshot::clear);
        error_examples.fill(None);
    }

    /// Counts one finished request.
    #[inline]
    fn add(&mut self, sample: &Sample) {
        self.requests += 1;
        self.bytes += sample.bytes;
        match sample.outcome {
            Outcome::Ok { status } => {
                self.ok += 1;
                self.status[usize::from(status).min(STATUS_SLOTS - 1)] += 1;
                self.latency.record(sample.latency_us);
                self.service.record(sample.service_us);
            }
            Outcome::BadStatus { status } => {
                self.status[usize::from(status).min(STATUS_SLOTS - 1)] += 1;
                self.errors[ErrorKind::Status as usize] += 1;
                self.failures.record(sample.latency_us);
            }
            Outcome::Failed(kind) => {
                self.errors[kind as usize] += 1;
                self.failures.record(sample.latency_us);
            }
        }
    }

    /// Adds a later interval's snapshot, as `+=` does, but with its
    /// refused time added to this one's rather than merged (the intervals
    /// follow each other; workers' snapshots of one interval overlap).
    pub fn add_interval(&mut self, later: &Snapshot) {
        let refused_us = self.refused_us + later.refused_us;
        *self += later;
        self.refused_us = refused_us;
    }

    /// Total failed requests of every kind.
    pub fn error_count(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Non-zero status counts, in code order (slot 0 holds the plan steps
    /// that have no status, such as `exec`, and is not a status).
    pub fn status_counts(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status
            .iter()
            .enumerate()
            .filter(|(code, n)| **n > 0 && *code > 0)
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
        self.latency += &other.latency;
        self.service += &other.service;
        self.failures += &other.failures;
        self.pacing += &other.pacing;
        self.handshakes += &other.handshakes;
        if self.steps.len() < other.steps.len() {
            self.steps.resize_with(other.steps.len(), Snapshot::default);
        }
        for (mine, theirs) in self.steps.iter_mut().zip(other.steps.iter()) {
            *mine += theirs;
        }
        for (mine, theirs) in self.error_examples.iter_mut().zip(other.error_examples.iter()) {
            if mine.is_none() {
                mine.clone_from(theirs);
            }
        }
        self.refused_us = self.refused_us.max(other.refused_us);
        if self.checks.len() < other.checks.len() {
            self.checks.resize(other.checks.len(), [0, 0]);
        }
        for (mine, theirs) in self.checks.iter_mut().zip(other.checks.iter()) {
            mine[0] += theirs[0];
            mine[1] += theirs[1];
        }
        self.iterations += other.iterations;
    }
}

/// A worker's recorder: records samples, hands out snapshots.
#[derive(Default)]
pub struct Recorder {
    current: Snapshot,
    /// Since when the worker's connects have failed, while they do.
    refused_since: Option<std::time::Instant>,
}

impl Recorder {
    /// Records one finished request. Never allocates.
    pub fn record(&mut self, sample: &Sample) {
        self.current.add(sample);
    }

    /// Records a scenario request: in the totals and in its step's own
    /// statistics. Never allocates.
    pub fn record_step(&mut self, step: usize, sample: &Sample) {
        self.current.add(sample);
        if let Some(snap) = self.current.steps.get_mut(step) {
            snap.add(sample);
        }
    }

    /// Records a step that is not an HTTP request (a plan's `exec`): in
    /// its step's statistics only, so the totals and req/s count requests.
    pub fn record_step_only(&mut self, step: usize, sample: &Sample) {
        if let Some(snap) = self.current.steps.get_mut(step) {
            snap.add(sample);
        }
    }

    /// Keeps a non-request step's error example on that step alone.
    pub fn note_step_only_error(&mut self, step: usize, err: &RequestError) {
        if let Some(snap) = self.current.steps.get_mut(step)
            && snap.error_examples[err.kind as usize].is_none()
        {
            snap.error_examples[err.kind as usize] = Some(err.message());
        }
    }

    /// Keeps an error's example for a step as well as for the totals.
    pub fn note_step_error(&mut self, step: usize, err: &RequestError) {
        self.note_error(err);
        if let Some(snap) = self.current.steps.get_mut(step)
            && snap.error_examples[err.kind as usize].is_none()
        {
            snap.error_examples[err.kind as usize] = Some(err.message());
        }
    }

    /// A VU script's check `index`: held or not.
    pub fn record_check(&mut self, index: usize, held: bool) {
        let checks = &mut self.current.checks;
        if checks.len() <= index {
            checks.resize(index + 1, [0, 0]);
        }
        checks[index][usize::from(!held)] += 1;
    }

    /// A VU script's iteration finished.
    pub fn record_iteration(&mut self) {
        self.current.iterations += 1;
    }

    /// Makes room for statistics of step `index` (a VU script's request
    /// names are met while the run goes).
    pub fn ensure_step(&mut self, index: usize) {
        let steps = &mut self.current.steps;
        if steps.len() <= index {
            steps.resize_with(index + 1, Snapshot::default);
        }
    }

    /// Open model: how long after its intended time a request went out, and
    /// whether its ticket had waited for a free connection.
    pub fn record_send_delay(&mut self, delay: std::time::Duration, queued: bool) {
        let us = delay.as_micros() as u64;
        let pacing = &mut self.current.pacing;
        pacing.sent += 1;
        pacing.max_delay_us = pacing.max_delay_us.max(us);
        if us >= LATE_US {
            pacing.late += 1;
            pacing.late_waiting_for_connection += u64::from(queued);
        }
    }

    /// Open model: how late the pacer woke for a ticket.
    pub fn record_pacer_lag(&mut self, lag: std::time::Duration) {
        self.current.pacing.pacer_lag.record(lag.as_micros() as u64);
    }

    /// A TLS handshake done: how long it took and whether it resumed a
    /// session. Never allocates.
    pub fn record_handshake(&mut self, took: std::time::Duration, resumed: bool) {
        let handshakes = &mut self.current.handshakes;
        handshakes.count += 1;
        handshakes.resumed += u64::from(resumed);
        handshakes.time.record(took.as_micros() as u64);
    }

    /// A handshake whose connection sent requests as 0-RTT early data
    /// (recorded besides [`Recorder::record_handshake`]): whether the
    /// server accepted them.
    pub fn record_zero_rtt(&mut self, accepted: bool) {
        let handshakes = &mut self.current.handshakes;
        handshakes.zero_rtt_tried += 1;
        handshakes.zero_rtt_accepted += u64::from(accepted);
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

    /// A recorder that also keeps statistics for `steps` scenario steps.
    pub fn with_steps(steps: usize) -> Recorder {
        Recorder {
            current: Snapshot::with_steps(steps),
            refused_since: None,
        }
    }

    /// A connect failed at `at`: the target refuses connections from then
    /// (from the first failure of a series) until one succeeds.
    pub fn connects_refused(&mut self, at: std::time::Instant) {
        self.refused_since.get_or_insert(at);
    }

    /// A connect succeeded: the time since the series of failures began
    /// counts as refused.
    pub fn connects_restored(&mut self, at: std::time::Instant) {
        if let Some(since) = self.refused_since.take() {
            self.current.refused_us += micros(at.saturating_duration_since(since));
        }
    }

    /// Counts the refused time up to now into the snapshot being swapped
    /// out, the rest going to the next (one check per interval while
    /// connects succeed).
    fn close_refusals(&mut self) {
        if let Some(since) = &mut self.refused_since {
            let now = std::time::Instant::now();
            self.current.refused_us += micros(now.saturating_duration_since(*since));
            *since = now;
        }
    }

    /// Swaps out what was recorded since the last call for `spare`, an
    /// empty snapshot (see [`Snapshot::clear`]): the swap itself allocates
    /// nothing, which is what a worker needs once per interval in the
    /// middle of its run. A spare with fewer per-step snapshots gets the
    /// missing ones here.
    pub fn swap(&mut self, mut spare: Snapshot) -> Snapshot {
        self.close_refusals();
        let steps = self.current.steps.len();
        if spare.steps.len() < steps {
            spare.steps.resize_with(steps, Snapshot::default);
        }
        std::mem::replace(&mut self.current, spare)
    }

    /// Swaps out what was recorded since the last call.
    pub fn take(&mut self) -> Snapshot {
        self.close_refusals();
        let fresh = Snapshot::with_steps(self.current.steps.len());
        std::mem::replace(&mut self.current, fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_time_runs_from_the_first_failed_connect_to_the_next_success() {
        let mut rec = Recorder::default();
        let t0 = std::time::Instant::now();
        rec.connects_refused(t0);
        // Later failures of the same series do not move its start.
        rec.connects_refused(t0 + std::time::Duration::from_millis(5));
        rec.connects_restored(t0 + std::time::Duration::from_millis(30));
        rec.connects_restored(t0 + std::time::Duration::from_millis(90));
        assert_eq!(rec.take().refused_us, 30_000);
        assert_eq!(rec.take().refused_us, 0, "a success ends the series");
        // A series still open at a swap is counted up to it, and goes on.
        rec.connects_refused(std::time::Instant::now() - std::time::Duration::from_millis(20));
        let first = rec.take().refused_us;
        assert!(first >= 20_000, "{first}");
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(rec.take().refused_us >= 2_000);
    }

    #[test]
    fn refused_time_of_workers_overlaps_and_of_intervals_adds_up() {
        let span = |us| Snapshot {
            refused_us: us,
            ..Snapshot::default()
        };
        let mut interval = span(300);
        interval += &span(500);
        assert_eq!(interval.refused_us, 500, "two workers refused at once");
        let mut total = span(1_000);
        total.add_interval(&interval);
        assert_eq!(total.refused_us, 1_500);
    }
    use crate::sample::ErrorDetail;

    fn ok(latency_us: u64) -> Sample {
        Sample {
            latency_us,
            service_us: latency_us,
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
            service_us: 5,
            bytes: 0,
            outcome: Outcome::Failed(ErrorKind::Timeout),
        });
        let snap = rec.take();
        assert_eq!(snap.requests, 3);
        assert_eq!(snap.ok, 2);
        assert_eq!(snap.errors[ErrorKind::Timeout as usize], 1);
        assert_eq!(
            snap.latency.hist.len(),
            2,
            "failures stay out of the latency histogram"
        );
        assert_eq!((snap.latency.min_us, snap.latency.max_us), (100, 300));
        assert_eq!(rec.take().requests, 0, "take leaves an empty recorder behind");
    }

    #[test]
    fn bad_status_counts_as_status_error_and_in_breakdown() {
        let mut rec = Recorder::default();
        rec.record(&Sample {
            latency_us: 10,
            service_us: 10,
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
        assert_eq!(total.latency.hist.len(), 3);
        assert_eq!(total.status[200], 3);
        assert_eq!(
            total.error_examples[ErrorKind::Reset as usize].as_deref(),
            Some("first")
        );
    }

    #[test]
    fn a_cleared_snapshot_is_as_good_as_a_new_one() {
        let mut rec = Recorder::with_steps(2);
        rec.record_step(1, &ok(700));
        rec.record(&Sample {
            latency_us: 9,
            service_us: 9,
            bytes: 0,
            outcome: Outcome::Failed(ErrorKind::Timeout),
        });
        rec.note_error(&RequestError::new(
            ErrorKind::Timeout,
            ErrorDetail::Static("slow"),
        ));
        rec.record_send_delay(std::time::Duration::from_millis(3), true);
        rec.record_pacer_lag(std::time::Duration::from_micros(40));
        rec.record_handshake(std::time::Duration::from_micros(900), true);
        let mut used = rec.take();
        used.clear();
        let mut fresh = Snapshot::with_steps(2);
        // Every field, the per-step ones too, compared through merging
        // the same interval into each.
        let mut again = Recorder::with_steps(2);
        again.record_step(0, &ok(50));
        let interval = again.take();
        used += &interval;
        fresh += &interval;
        assert_eq!(format!("{used:?}"), format!("{fresh:?}"));
    }

    #[test]
    fn a_swap_hands_out_what_was_recorded_and_keeps_the_spare() {
        let mut rec = Recorder::with_steps(3);
        rec.record_step(2, &ok(100));
        // A spare from before the plan's steps were known gets them.
        let out = rec.swap(Snapshot::default());
        assert_eq!((out.requests, out.steps[2].requests), (1, 1));
        rec.record_step(2, &ok(100));
        let next = rec.take();
        assert_eq!(
            (next.requests, next.steps.len(), next.steps[2].requests),
            (1, 3, 1)
        );
    }

    #[test]
    fn pacing_separates_late_sends() {
        let mut rec = Recorder::default();
        rec.record_send_delay(std::time::Duration::from_micros(200), false);
        rec.record_send_delay(std::time::Duration::from_millis(5), true);
        rec.record_send_delay(std::time::Duration::from_millis(2), false);
        rec.record_pacer_lag(std::time::Duration::from_micros(30));
        let pacing = rec.take().pacing;
        assert_eq!(
            (pacing.sent, pacing.late, pacing.late_waiting_for_connection),
            (3, 2, 1)
        );
        assert_eq!(pacing.max_delay_us, 5000);
        assert_eq!(pacing.pacer_lag.max_us, 30);
    }

    #[test]
    fn handshakes_count_resumed_ones_and_merge() {
        let mut a = Recorder::default();
        a.record_handshake(std::time::Duration::from_micros(900), false);
        a.record_handshake(std::time::Duration::from_micros(300), true);
        let mut b = Recorder::default();
        b.record_handshake(std::time::Duration::from_micros(250), true);
        b.record_zero_rtt(true);
        a.record_zero_rtt(false);
        let mut total = a.take();
        total += &b.take();
        let h = &total.handshakes;
        assert_eq!((h.count, h.resumed), (3, 2));
        assert_eq!((h.zero_rtt_tried, h.zero_rtt_accepted), (2, 1));
        assert_eq!((h.time.min_us, h.time.max_us), (250, 900));
        assert_eq!(total.requests, 0, "handshakes are not requests");
    }

    #[test]
    fn huge_latencies_are_clamped_not_lost() {
        let mut rec = Recorder::default();
        rec.record(&ok(u64::MAX / 2));
        let snap = rec.take();
        assert_eq!(snap.latency.hist.len(), 1);
        assert_eq!(snap.latency.max_us, LATENCY_MAX_US);
    }
}
