//! Latency histograms as exponential buckets: what Prometheus native
//! histograms and OTLP exponential histograms carry.
//!
//! The engine records latency in an HDR histogram (microseconds, 0.1%
//! precision). Receivers want buckets whose bounds grow by a fixed factor,
//! `2^(2^-SCHEMA)`: with [`SCHEMA`] 5 that factor is 2^(1/32) ≈ 1.0219, so
//! any quantile a receiver estimates inside a bucket is within 2.2% of the
//! true value (2.3% with the HDR recording's own 0.1%). Buckets are sparse:
//! only those holding requests are sent, a few hundred at most for
//! latencies spanning microseconds to seconds.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// Prometheus's schema (OTLP's scale): 2^5 = 32 buckets per power of two.
pub const SCHEMA: i32 = 5;

/// The largest relative error of a quantile read from these buckets,
/// HDR precision included (stated in the README).
pub const RELATIVE_ERROR: f64 = 0.023;

/// Classic bucket bounds in seconds, for receivers without native histograms.
pub const CLASSIC_BOUNDS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// A cumulative latency distribution in seconds, as exponential buckets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exponential {
    pub count: u64,
    pub sum_s: f64,
    /// Bucket index (Prometheus's: bucket `i` holds values in
    /// `(base^(i-1), base^i]`) to its count; empty buckets are absent.
    pub buckets: BTreeMap<i32, u64>,
    /// Cumulative counts at each of [`CLASSIC_BOUNDS`] (values at or below).
    pub classic: Vec<u64>,
}

/// The bucket index of a value in seconds under [`SCHEMA`].
pub fn bucket_index(seconds: f64) -> i32 {
    (seconds.log2() * f64::from(1 << SCHEMA)).ceil() as i32
}

/// The upper bound of bucket `index`, in seconds.
pub fn upper_bound(index: i32) -> f64 {
    (f64::from(index) / f64::from(1 << SCHEMA)).exp2()
}

impl Exponential {
    /// Converts a histogram of microseconds. Each HDR bucket goes whole to
    /// the exponential bucket of its middle value, which is within 0.1% of
    /// every value it holds.
    pub fn from_hdr_us(hist: &Histogram<u64>) -> Exponential {
        let mut out = Exponential {
            classic: vec![0; CLASSIC_BOUNDS.len()],
            ..Exponential::default()
        };
        for value in hist.iter_recorded() {
            let n = value.count_at_value();
            let seconds = hist.median_equivalent(value.value_iterated_to()) as f64 / 1e6;
            out.count += n;
            out.sum_s += seconds * n as f64;
            *out.buckets.entry(bucket_index(seconds)).or_default() += n;
            for (bound, cumulative) in CLASSIC_BOUNDS.iter().zip(out.classic.iter_mut()) {
                if seconds <= *bound {
                    *cumulative += n;
                }
            }
        }
        out
    }

    /// The buckets as runs of consecutive indexes: (first index, counts).
    pub fn runs(&self) -> Vec<(i32, Vec<u64>)> {
        let mut runs: Vec<(i32, Vec<u64>)> = Vec::new();
        for (&index, &count) in &self.buckets {
            match runs.last_mut() {
                Some((first, counts)) if *first + counts.len() as i32 == index => counts.push(count),
                _ => runs.push((index, vec![count])),
            }
        }
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::new_latency_histogram;

    #[test]
    fn bucket_bounds_grow_by_the_schema_factor() {
        assert_eq!(bucket_index(1.0), 0);
        assert_eq!(bucket_index(1.01), 1);
        assert_eq!(bucket_index(2.0), 32);
        assert_eq!(bucket_index(0.5), -32);
        assert!((upper_bound(1) / upper_bound(0) - 2f64.powf(1.0 / 32.0)).abs() < 1e-12);
        for v in [0.000_123, 0.004_2, 0.25, 3.7] {
            let i = bucket_index(v);
            assert!(upper_bound(i - 1) < v && v <= upper_bound(i), "{v} in bucket {i}");
        }
    }

    #[test]
    fn conversion_keeps_every_count_and_quantiles_within_the_stated_error() {
        let mut hist = new_latency_histogram();
        for us in 1..=20_000u64 {
            hist.record(us * 7 % 90_000 + 50).unwrap();
        }
        let exp = Exponential::from_hdr_us(&hist);
        assert_eq!(exp.count, 20_000);
        assert_eq!(exp.buckets.values().sum::<u64>(), 20_000);
        assert_eq!(*exp.classic.last().unwrap(), 20_000);
        // The bucket holding the 99th percentile bounds it within the error.
        let rank = (0.99 * 20_000f64).ceil() as u64;
        let mut seen = 0;
        let index = *exp
            .buckets
            .iter()
            .find(|(_, n)| {
                seen += **n;
                seen >= rank
            })
            .unwrap()
            .0;
        let p99_s = hist.value_at_quantile(0.99) as f64 / 1e6;
        for estimate in [upper_bound(index - 1), upper_bound(index)] {
            assert!(
                (estimate - p99_s).abs() / p99_s <= RELATIVE_ERROR,
                "{estimate} vs {p99_s}"
            );
        }
        let mean = exp.sum_s / exp.count as f64;
        assert!((mean - hist.mean() / 1e6).abs() / mean < 0.001);
    }

    #[test]
    fn runs_group_consecutive_buckets() {
        let exp = Exponential {
            buckets: [(-3, 1), (-2, 2), (0, 5), (7, 1)].into_iter().collect(),
            ..Exponential::default()
        };
        assert_eq!(exp.runs(), vec![(-3, vec![1, 2]), (0, vec![5]), (7, vec![1])]);
    }
}
