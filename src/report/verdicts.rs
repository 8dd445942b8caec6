//! What the judging commands add to a report: `volley step`'s levels and
//! verdict, `--threshold` results and `volley compare`'s rows. Their types
//! live here, below `step`, `thresholds` and `compare`, so the report can hold
//! and render them without naming the modules that compute them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One row of the step table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LevelRow {
    pub load: f64,
    pub requests: u64,
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub error_pct: f64,
    pub within_slo: bool,
}

impl LevelRow {
    /// Whether any request of the level succeeded: without one, its
    /// latency figures are not shown.
    pub fn any_succeeded(&self) -> bool {
        self.requests > 0 && self.error_pct < 100.0
    }
}

/// The five criteria.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Verdict5 {
    /// p50 at the lightest level.
    pub responsiveness_p50_ms: f64,
    pub lightest_load: f64,
    /// The best throughput and the level that reached it.
    pub best_rps: f64,
    pub best_rps_load: f64,
    /// The highest level within the SLO before the first level that
    /// breaks it (`None`: even the lightest broke it).
    pub max_load: Option<f64>,
    /// Tail latency at the maximum load.
    pub tail_p99_ms: Option<f64>,
    pub tail_p999_ms: Option<f64>,
    pub tail_max_ms: Option<f64>,
    /// Errors in the levels past the maximum load, by kind.
    pub errors_past_max: BTreeMap<String, u64>,
    /// How fast those failures came back: the p50 at the first level past
    /// the maximum that had failures, and the slowest of all of them.
    pub failure_p50_ms_past_max: Option<f64>,
    pub failure_max_ms_past_max: Option<f64>,
    /// p99 at the first level past the maximum load (the queueing).
    pub p99_past_max_ms: Option<f64>,
    /// Stopped before the last level because errors passed `--stop-errors`.
    pub stopped_early: bool,
}

/// What `volley step` adds to the report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepReport {
    /// "connections" or "req/s".
    pub unit: String,
    pub slo: Vec<String>,
    pub levels: Vec<LevelRow>,
    pub verdict: Verdict5,
}

/// One criterion checked on one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThresholdResult {
    pub criterion: String,
    pub url: String,
    /// The measured value, in the criterion's unit (ms, %, req/s).
    pub value: f64,
    pub passed: bool,
}

/// One compared metric.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub metric: &'static str,
    pub a: f64,
    pub b: f64,
    /// (b - a) / a, in percent.
    pub change_pct: f64,
    /// The test's p-value, where a test gives one.
    pub p_value: Option<f64>,
    pub significant: bool,
    /// Statistically significant, but smaller than the noise threshold.
    pub within_noise: bool,
    /// A higher value is worse (latency, errors).
    pub higher_is_worse: bool,
}
