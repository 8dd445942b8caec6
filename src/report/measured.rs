//! A finished run's summary as figures a criterion can look at: the report
//! implements [`Measured`] for its own data, so `slo` needs no report types.

use super::Summary;
use crate::slo::Measured;

/// A finished run: its summary, with its histogram for odd percentiles.
pub struct Finished<'a> {
    pub summary: &'a Summary,
    pub histogram: Option<&'a hdrhistogram::Histogram<u64>>,
}

impl Measured for Finished<'_> {
    fn requests(&self) -> u64 {
        self.summary.requests
    }
    fn errors(&self) -> u64 {
        self.summary.errors
    }
    fn ok(&self) -> u64 {
        self.summary.ok
    }
    fn rps(&self) -> f64 {
        self.summary.rps
    }
    fn percentile_ms(&self, p: f64) -> f64 {
        let l = &self.summary.latency_ms;
        match p {
            50.0 => l.p50,
            75.0 => l.p75,
            90.0 => l.p90,
            95.0 => l.p95,
            99.0 => l.p99,
            99.9 => l.p999,
            99.99 => l.p9999,
            100.0 => l.max,
            _ => self
                .histogram
                .filter(|h| !h.is_empty())
                .map_or(0.0, |h| h.value_at_quantile(p / 100.0) as f64 / 1000.0),
        }
    }
    fn mean_ms(&self) -> f64 {
        self.summary.latency_ms.mean
    }
}
