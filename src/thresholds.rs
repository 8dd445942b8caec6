//! `--threshold "p99<200ms"`: pass/fail criteria on a finished run (k6's
//! thresholds), and `--abort-on-fail`, which stops a run as soon as its
//! totals so far break one.

use crate::collector::SeriesRow;
use crate::engine::{Observer, PhaseSummary};
use crate::recorder::Snapshot;
use crate::report::Finished;
pub use crate::report::ThresholdResult;
use crate::report::{Report, RunReport};
use crate::slo::{Criterion, SoFar};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Checks every criterion on each run of the report (for `volley step`,
/// on the level found to be the maximum load).
pub fn check<P>(report: &Report<P>, criteria: &[Criterion]) -> Vec<ThresholdResult> {
    let runs: Vec<&RunReport> = match &report.step {
        Some(step) => match step.verdict.max_load {
            Some(max) => report.runs.iter().filter(|r| r.load == Some(max)).collect(),
            None => report.runs.first().into_iter().collect(),
        },
        None => report.runs.iter().collect(),
    };
    let mut results = Vec::new();
    for run in runs {
        let figures = Finished {
            summary: &run.summary,
            histogram: Some(&run.histogram.0),
        };
        for criterion in criteria {
            results.push(ThresholdResult {
                criterion: criterion.text.clone(),
                url: run.url.clone(),
                value: criterion.measure(&figures),
                passed: criterion.holds(&figures),
            });
        }
    }
    results
}

/// The pass/fail block of the text report.
pub fn render(results: &[ThresholdResult], criteria: &[Criterion]) -> String {
    let mut out = String::new();
    if results.is_empty() {
        return out;
    }
    let _ = writeln!(out, "thresholds");
    for r in results {
        let unit = criteria
            .iter()
            .find(|c| c.text == r.criterion)
            .map_or(String::new(), |c| c.describe(r.value));
        let _ = writeln!(
            out,
            "  {:<6} {:<20} measured {unit}  ({})",
            if r.passed { "pass" } else { "FAIL" },
            r.criterion,
            r.url
        );
    }
    out
}

/// Wraps the live view: after each interval, checks the totals so far and
/// stops the run when one criterion fails (`--abort-on-fail`).
pub struct AbortOnFail<'a> {
    pub inner: &'a mut dyn Observer,
    pub criteria: &'a [Criterion],
    pub stop: Arc<AtomicBool>,
    /// Which criterion stopped the run.
    pub failed: Option<String>,
    /// The end of the last finished interval, since the measured start.
    elapsed: Duration,
}

impl<'a> AbortOnFail<'a> {
    pub fn new(inner: &'a mut dyn Observer, criteria: &'a [Criterion], stop: Arc<AtomicBool>) -> Self {
        AbortOnFail {
            inner,
            criteria,
            stop,
            failed: None,
            elapsed: Duration::ZERO,
        }
    }
}

impl Observer for AbortOnFail<'_> {
    fn warmup_done(&mut self, warmup: &PhaseSummary) {
        self.inner.warmup_done(warmup);
    }

    fn row(&mut self, row: &SeriesRow, steps: &[SeriesRow]) {
        self.inner.row(row, steps);
        self.elapsed = crate::sys::secs(row.t_s);
    }

    /// Judged once per finished interval, on everything measured up to its
    /// end (lent, not copied: the totals are some 1 MB of histograms).
    fn interval_snapshot(&mut self, interval: &Snapshot, total: &Snapshot) {
        self.inner.interval_snapshot(interval, total);
        if self.failed.is_some() || total.requests == 0 {
            return;
        }
        let figures = SoFar {
            snapshot: total,
            elapsed: self.elapsed,
        };
        if let Some(c) = self.criteria.iter().find(|c| !c.holds(&figures)) {
            self.failed = Some(c.text.clone());
            self.stop.store(true, Ordering::SeqCst);
        }
    }

    fn tick(&mut self, elapsed: Duration, so_far: &Snapshot, last: Option<&SeriesRow>) {
        self.inner.tick(elapsed, so_far, last);
    }
}
