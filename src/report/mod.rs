//! The report of a whole invocation, built once from the engine's results
//! and rendered as text ([`text`]) or JSON (this value, serialised).
//!
//! The JSON shape is a stable contract (`schema/report-v1.json`); fields are
//! only ever added.

/// Kept under `report` too: saved reports are where its strings live.
pub use crate::histogram;
pub mod html;
pub mod live;
mod measured;
pub mod saved;
pub mod stream;
pub mod text;
pub mod verdicts;

use crate::collector::{SeriesRow, us_to_ms};
use crate::engine::{PhaseSummary, RunResult};
use crate::histogram::EncodedHistogram;
use crate::plan::Plan;
use crate::recorder::{Handshakes, Pacing, Snapshot, Timings};
use crate::sys::CpuTime;
pub use measured::Finished;
pub use saved::LoadError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
pub use verdicts::ThresholdResult;

/// The schema name scripts check before reading a report.
pub const SCHEMA: &str = "volley.report/1";

/// Above this share of its threads' time the tool itself was the bottleneck.
pub const SATURATED: f64 = 0.90;

/// Runs shorter than this are too short for their CPU share to say the
/// tool was the limit.
const SATURATION_JUDGED_FROM: Duration = Duration::from_millis(200);

#[derive(Clone, Debug, Serialize, Deserialize)]
///
/// `P` is the plan: the resolved [`Plan`] while running; a saved report read
/// back ([`SavedReport`]) keeps the plan as the JSON it recorded, since a
/// plan file's scenario or a client key is not rebuilt from a report.
pub struct Report<P = Plan> {
    pub schema: String,
    pub tool: Tool,
    /// When the invocation started (RFC 3339, UTC).
    pub started_at: String,
    pub plan: P,
    /// A hash of the whole plan (before any `--shard` split, without the
    /// machine-dependent thread count): equal on every shard of one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_hash: Option<String>,
    /// `--start-at`: when the measured run was planned to start and how far
    /// off it actually started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<StartInfo>,
    /// `volley merge`: the shards this report was merged from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergeInfo>,
    pub runs: Vec<RunReport>,
    /// `volley step`: the table of levels and the five criteria.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<verdicts::StepReport>,
    /// `--threshold` results (empty when none were given).
    pub thresholds: Vec<ThresholdResult>,
    /// The threshold that stopped the run early (`--abort-on-fail`).
    pub aborted_by: Option<String>,
    /// Whether Ctrl-C cut the invocation short.
    pub interrupted: bool,
    /// `--run-id` (generated when not given): the `run` label of the
    /// metric outputs. Absent in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// `--out`: what each metric output delivered and dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<OutputReport>,
}

/// One `--out` destination's delivery, as the run ended.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OutputReport {
    /// `prometheus` or `otlp`.
    pub kind: String,
    pub url: String,
    /// Batches (one per interval) handed to the output.
    pub batches: u64,
    pub delivered: u64,
    /// Batches the receiver never got: down, too slow, refusing, or the
    /// queue was full.
    pub dropped: u64,
    /// Prometheus: `native` or `classic` (when the receiver refused native
    /// histograms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histograms: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

/// A saved report read back: typed throughout except the recorded plan.
pub type SavedReport = Report<serde_json::Value>;

/// When a `--start-at` run began, against its plan.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StartInfo {
    /// The planned start of the measured run (RFC 3339, UTC, milliseconds).
    pub planned_start: String,
    /// Actual start minus planned start, in milliseconds (late is positive).
    pub skew_ms: f64,
}

/// What `volley merge` combined.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MergeInfo {
    /// How many shards the plan had (N of `--shard I/N`).
    pub count: u32,
    /// Each merged shard's index and start skew, by index.
    pub shards: Vec<MergedShard>,
    /// Indexes left out (`--partial`); empty for a complete merge.
    pub missing: Vec<u32>,
}

/// One shard of a merge.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MergedShard {
    pub index: u32,
    /// Its start skew in milliseconds (absent without `--start-at`).
    pub skew_ms: Option<f64>,
}

/// One URL's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunReport {
    pub url: String,
    /// The protocol spoken: `http/1.1`, `h2` (over TLS) or `h2c`.
    pub protocol: String,
    /// How the workers waited on their sockets: `io_uring` or `epoll`
    /// (absent in older reports and in merged ones whose shards differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<String>,
    /// `volley step`: the level of load of this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<f64>,
    pub warmup: Option<PhaseTotals>,
    pub summary: Summary,
    pub series: Vec<SeriesRow>,
    /// The watched target process (`--monitor-pid`, `--spawn`).
    pub target: Option<crate::monitor::ProcSummary>,
    /// volley's own process over the run.
    pub tool_process: Option<crate::monitor::ProcSummary>,
    /// Scenarios: each named plan item's statistics.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepStats>,
    /// A VU script: its iterations finished (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u64>,
    /// A VU script's checks, by name, in the order first met.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckStats>,
    /// The whole run's latency histogram of successful requests, in
    /// microseconds: HdrHistogram V2 (deflate) encoding, base64.
    pub histogram: EncodedHistogram,
    /// The service times' histogram (from the actual send), same encoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_histogram: Option<EncodedHistogram>,
    /// Failed requests' times, same encoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures_histogram: Option<EncodedHistogram>,
    pub interrupted: bool,
}

/// One check of a VU script: how often it held and failed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CheckStats {
    pub name: String,
    pub passes: u64,
    pub fails: u64,
}

/// One scenario step's statistics: the same shape as a run's.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepStats {
    pub name: String,
    pub summary: Summary,
    pub series: Vec<SeriesRow>,
}

/// Totals of a phase that is shown but not analysed (the warm-up).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseTotals {
    pub requests: u64,
    pub ok: u64,
    pub errors: u64,
    pub elapsed_s: f64,
    pub rps: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    pub requests: u64,
    pub ok: u64,
    pub errors: u64,
    pub elapsed_s: f64,
    pub rps: f64,
    pub bytes: u64,
    pub bytes_per_s: f64,
    /// From the intended send time (the actual send in the closed model).
    pub latency_ms: Latency,
    /// From the actual send: what the server took, queueing excluded.
    pub service_ms: Latency,
    /// How long failed requests took (from the intended send).
    pub failures_ms: Latency,
    /// Open model only.
    pub schedule: Option<Schedule>,
    /// Only when TLS handshakes were made in the measured phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsHandshakes>,
    /// Only when connects failed: for how long, in seconds, the target
    /// refused connections (from a failed connect until one succeeded), so
    /// that the failure share reads by time as well as by attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_s: Option<f64>,
    pub status: BTreeMap<String, u64>,
    pub errors_by_kind: BTreeMap<String, u64>,
    /// One example message per error kind.
    pub error_examples: BTreeMap<String, String>,
    pub distribution: Vec<Bucket>,
    pub tool_cpu: ToolCpu,
}

/// Latency of successful requests, in milliseconds (all zero when none).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub min: f64,
    pub mean: f64,
    pub stdev: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
}

/// One row of the response-time distribution (Gatling's report).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Bucket {
    pub label: String,
    /// Lower bound, inclusive, in ms; absent for the `failed` row.
    pub from_ms: Option<f64>,
    /// Upper bound, exclusive, in ms; absent for the open-ended rows.
    pub to_ms: Option<f64>,
    pub count: u64,
    pub percent: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ToolCpu {
    pub user_s: f64,
    pub sys_s: f64,
    /// CPU time over (elapsed x threads): 1.0 means every worker was busy.
    pub utilisation: f64,
    pub threads: usize,
    pub saturated: bool,
    /// Peak resident memory of the volley process, in bytes.
    pub peak_rss_bytes: u64,
}

impl Latency {
    /// From a histogram and its exact extremes (a merge's: the shards'
    /// smallest minimum and largest maximum), in microseconds.
    pub fn from_histogram(hist: &hdrhistogram::Histogram<u64>, min_ms: f64, max_ms: f64) -> Latency {
        let timings = Timings {
            hist: hist.clone(),
            min_us: (min_ms * 1000.0).round() as u64,
            max_us: (max_ms * 1000.0).round() as u64,
        };
        Latency::from_timings(&timings)
    }

    pub fn from_timings(t: &Timings) -> Latency {
        if t.is_empty() {
            return Latency::default();
        }
        let q = |quantile: f64| us_to_ms(t.quantile_us(quantile));
        Latency {
            min: us_to_ms(t.min_us),
            mean: t.hist.mean() / 1000.0,
            stdev: t.hist.stdev() / 1000.0,
            p50: q(0.50),
            p75: q(0.75),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            p9999: q(0.9999),
            max: us_to_ms(t.max_us),
        }
    }
}

/// Open model: how well the schedule held.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Schedule {
    /// Requests sent on the schedule.
    pub sent: u64,
    /// Sent 1 ms or more after their intended time.
    pub late: u64,
    /// Of the late ones, those that had waited for a free connection (the
    /// rest were late because the tool itself was).
    pub late_waiting_for_connection: u64,
    /// The largest delay from intended to actual send.
    pub max_delay_ms: f64,
    /// How late the pacer woke for its tickets: the tool's own lag.
    pub tool_lag_p50_ms: f64,
    pub tool_lag_p99_ms: f64,
    pub tool_lag_max_ms: f64,
}

impl Schedule {
    fn from_pacing(p: &Pacing) -> Schedule {
        Schedule {
            sent: p.sent,
            late: p.late,
            late_waiting_for_connection: p.late_waiting_for_connection,
            max_delay_ms: us_to_ms(p.max_delay_us),
            tool_lag_p50_ms: us_to_ms(p.pacer_lag.quantile_us(0.5)),
            tool_lag_p99_ms: us_to_ms(p.pacer_lag.quantile_us(0.99)),
            tool_lag_max_ms: us_to_ms(p.pacer_lag.max_us),
        }
    }
}

/// The TLS handshakes of new connections.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TlsHandshakes {
    pub handshakes: u64,
    /// Of those, the ones that resumed an earlier session.
    pub resumed: u64,
    /// HTTP/3 with `--0rtt`: connections whose first requests went as
    /// 0-RTT early data, and those of them the server accepted (absent
    /// from reports older than these counts: 0).
    #[serde(default)]
    pub zero_rtt_tried: u64,
    #[serde(default)]
    pub zero_rtt_accepted: u64,
    /// From TCP connected to handshake done.
    pub handshake_ms: Latency,
}

impl TlsHandshakes {
    /// `None` when there were none (plain HTTP, or every connection opened
    /// during the warm-up).
    fn from_handshakes(h: &Handshakes) -> Option<TlsHandshakes> {
        (h.count > 0).then(|| TlsHandshakes {
            handshakes: h.count,
            resumed: h.resumed,
            zero_rtt_tried: h.zero_rtt_tried,
            zero_rtt_accepted: h.zero_rtt_accepted,
            handshake_ms: Latency::from_timings(&h.time),
        })
    }
}

fn rate(count: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

fn format_ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms.fract() == 0.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms} ms")
    }
}

/// Splits successful requests at the thresholds, then counts failures.
pub fn distribution(snap: &Snapshot, thresholds: &[Duration]) -> Vec<Bucket> {
    let bounds_us: Vec<u64> = thresholds.iter().map(|t| t.as_micros() as u64).collect();
    let mut counts = vec![0u64; bounds_us.len() + 1];
    let hist = &snap.latency.hist;
    for value in hist.iter_recorded() {
        let v = hist.highest_equivalent(value.value_iterated_to());
        let slot = bounds_us.iter().position(|b| v < *b).unwrap_or(bounds_us.len());
        counts[slot] += value.count_since_last_iteration();
    }
    let total = snap.requests.max(1) as f64;
    let percent = |n: u64| 100.0 * n as f64 / total;
    let mut rows = Vec::with_capacity(counts.len() + 1);
    for (i, count) in counts.into_iter().enumerate() {
        let from = i.checked_sub(1).map(|j| thresholds[j]);
        let to = thresholds.get(i).copied();
        let label = match (from, to) {
            (None, Some(to)) => format!("t < {}", format_ms(to)),
            (Some(from), Some(to)) => format!("{} <= t < {}", format_ms(from), format_ms(to)),
            (Some(from), None) => format!("t >= {}", format_ms(from)),
            (None, None) => "ok".to_string(),
        };
        rows.push(Bucket {
            label,
            from_ms: from.map(|d| d.as_secs_f64() * 1000.0),
            to_ms: to.map(|d| d.as_secs_f64() * 1000.0),
            count,
            percent: percent(count),
        });
    }
    let failed = snap.requests - snap.ok;
    rows.push(Bucket {
        label: "failed".to_string(),
        from_ms: None,
        to_ms: None,
        count: failed,
        percent: percent(failed),
    });
    rows
}

impl PhaseTotals {
    pub fn from_phase(phase: &PhaseSummary) -> PhaseTotals {
        PhaseTotals {
            requests: phase.snapshot.requests,
            ok: phase.snapshot.ok,
            errors: phase.snapshot.error_count(),
            elapsed_s: phase.elapsed.as_secs_f64(),
            rps: rate(phase.snapshot.requests, phase.elapsed),
        }
    }
}

impl ToolCpu {
    pub fn new(cpu: CpuTime, elapsed: Duration, threads: usize) -> ToolCpu {
        let capacity = elapsed.as_secs_f64() * threads as f64;
        let utilisation = if capacity > 0.0 {
            cpu.total_s() / capacity
        } else {
            0.0
        };
        ToolCpu {
            user_s: cpu.user_s,
            sys_s: cpu.sys_s,
            utilisation,
            threads,
            // A run of a few milliseconds (a one-iteration plan) is judged
            // on CPU times counted in scheduler ticks and on its threads'
            // start, which make any share look high: it is not a busy tool.
            saturated: utilisation >= SATURATED && elapsed >= SATURATION_JUDGED_FROM,
            peak_rss_bytes: crate::sys::peak_rss_bytes(),
        }
    }
}

impl Summary {
    pub fn new(
        snap: &Snapshot,
        elapsed: Duration,
        cpu: CpuTime,
        threads: usize,
        buckets: &[Duration],
    ) -> Summary {
        Summary {
            requests: snap.requests,
            ok: snap.ok,
            errors: snap.error_count(),
            elapsed_s: elapsed.as_secs_f64(),
            rps: rate(snap.requests, elapsed),
            bytes: snap.bytes,
            bytes_per_s: rate(snap.bytes, elapsed),
            latency_ms: Latency::from_timings(&snap.latency),
            service_ms: Latency::from_timings(&snap.service),
            failures_ms: Latency::from_timings(&snap.failures),
            schedule: (snap.pacing.sent > 0).then(|| Schedule::from_pacing(&snap.pacing)),
            tls: TlsHandshakes::from_handshakes(&snap.handshakes),
            // Within the run: the last interval's part counts to its end.
            refused_s: (snap.refused_us > 0)
                .then(|| (snap.refused_us as f64 / 1e6).min(elapsed.as_secs_f64())),
            status: snap
                .status_counts()
                .map(|(code, n)| (code.to_string(), n))
                .collect(),
            errors_by_kind: snap
                .error_kinds()
                .map(|(kind, n, _)| (kind.name().to_string(), n))
                .collect(),
            error_examples: snap
                .error_kinds()
                .filter_map(|(kind, _, example)| example.map(|e| (kind.name().to_string(), e.to_string())))
                .collect(),
            distribution: distribution(snap, buckets),
            tool_cpu: ToolCpu::new(cpu, elapsed, threads),
        }
    }
}

impl RunReport {
    pub fn new(url: &str, result: &RunResult, plan: &Plan) -> RunReport {
        RunReport {
            url: url.to_string(),
            protocol: result.protocol.to_string(),
            io: Some(result.io.to_string()),
            load: None,
            warmup: result.warmup.as_ref().map(PhaseTotals::from_phase),
            summary: Summary::new(
                &result.total,
                result.elapsed,
                result.cpu,
                result.threads,
                &plan.reporting.buckets,
            ),
            target: plan.watch.monitor_pid.map(|pid| {
                let samples: Vec<_> = result.series.iter().filter_map(|r| r.target).collect();
                crate::monitor::ProcSummary::from_samples(
                    pid,
                    result.target_before,
                    &samples,
                    result.target_exited,
                )
            }),
            tool_process: {
                let samples: Vec<_> = result.series.iter().filter_map(|r| r.tool).collect();
                (!samples.is_empty()).then(|| {
                    crate::monitor::ProcSummary::from_samples(std::process::id(), None, &samples, false)
                })
            },
            series: result.series.clone(),
            steps: plan
                .request
                .step_names()
                .into_iter()
                .enumerate()
                .map(|(i, name)| StepStats {
                    name,
                    summary: Summary::new(
                        result.total.steps.get(i).unwrap_or(&Snapshot::default()),
                        result.elapsed,
                        result.cpu,
                        result.threads,
                        &plan.reporting.buckets,
                    ),
                    series: result.step_series.get(i).cloned().unwrap_or_default(),
                })
                .collect(),
            iterations: plan.request.users.as_ref().map(|_| result.total.iterations),
            checks: plan
                .request
                .users
                .as_ref()
                .map(|users| {
                    let counts = &result.total.checks;
                    users
                        .checks
                        .list()
                        .into_iter()
                        .enumerate()
                        .map(|(i, name)| {
                            let [passes, fails] = counts.get(i).copied().unwrap_or_default();
                            CheckStats { name, passes, fails }
                        })
                        .collect()
                })
                .unwrap_or_default(),
            histogram: EncodedHistogram(result.total.latency.hist.clone()),
            service_histogram: Some(EncodedHistogram(result.total.service.hist.clone())),
            failures_histogram: Some(EncodedHistogram(result.total.failures.hist.clone())),
            interrupted: result.interrupted,
        }
    }
}

impl Report {
    pub fn new(plan: Plan, started_at: std::time::SystemTime) -> Report {
        Report {
            schema: SCHEMA.to_string(),
            tool: Tool {
                name: "volley".to_string(),
                version: env!("CARGO_PKG_VERSION").to_string(),
            },
            started_at: humantime::format_rfc3339_seconds(started_at).to_string(),
            plan_hash: Some(plan.whole_plan_hash()),
            start: None,
            merged: None,
            plan,
            runs: Vec::new(),
            step: None,
            thresholds: Vec::new(),
            aborted_by: None,
            interrupted: false,
            run_id: None,
            outputs: Vec::new(),
        }
    }
}

impl<P: Serialize> Report<P> {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report values always serialise")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::Recorder;
    use crate::sample::{ErrorKind, Outcome, Sample};

    #[test]
    fn only_a_run_long_enough_to_judge_is_called_saturated() {
        let cpu = |s: f64| crate::sys::CpuTime {
            user_s: s,
            sys_s: 0.0,
        };
        // 4 ms of CPU in a 1 ms run: thread start and tick rounding.
        let tiny = ToolCpu::new(cpu(0.004), Duration::from_millis(1), 1);
        assert!(tiny.utilisation > 1.0 && !tiny.saturated);
        let busy = ToolCpu::new(cpu(1.9), Duration::from_secs(2), 1);
        assert!(busy.saturated);
        let idle = ToolCpu::new(cpu(0.5), Duration::from_secs(2), 1);
        assert!(!idle.saturated);
    }

    #[test]
    fn distribution_splits_at_thresholds() {
        let mut rec = Recorder::default();
        for ms in [10, 799, 800, 1199, 1200, 5000] {
            rec.record(&Sample {
                latency_us: ms * 1000,
                service_us: ms * 1000,
                bytes: 0,
                outcome: Outcome::Ok { status: 200 },
            });
        }
        rec.record(&Sample {
            latency_us: 1,
            service_us: 1,
            bytes: 0,
            outcome: Outcome::Failed(ErrorKind::Reset),
        });
        let rows = distribution(
            &rec.take(),
            &[Duration::from_millis(800), Duration::from_millis(1200)],
        );
        let counts: Vec<u64> = rows.iter().map(|r| r.count).collect();
        assert_eq!(counts, vec![2, 2, 2, 1]);
        assert_eq!(rows[0].label, "t < 800 ms");
        assert_eq!(rows[1].label, "800 ms <= t < 1200 ms");
        assert_eq!(rows[2].label, "t >= 1200 ms");
        assert_eq!(rows[3].label, "failed");
        assert!((rows.iter().map(|r| r.percent).sum::<f64>() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn latency_in_ms() {
        let mut rec = Recorder::default();
        for us in [1000, 2000, 3000] {
            rec.record(&Sample {
                latency_us: us,
                service_us: us,
                bytes: 0,
                outcome: Outcome::Ok { status: 200 },
            });
        }
        let lat = Latency::from_timings(&rec.take().latency);
        assert_eq!((lat.min, lat.p50, lat.max), (1.0, 2.0, 3.0));
        assert!((lat.mean - 2.0).abs() < 0.01);
    }
}
