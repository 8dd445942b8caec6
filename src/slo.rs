//! Criteria on a run's summary: `p99<500ms`, `errors<1%`, `rps>5000`.
//!
//! `volley step` uses them as the service-level objective that decides the
//! maximum load; the same parser serves run thresholds. A pure module below
//! `plan` (which holds parsed criteria) and the reports (whose summaries
//! implement [`Measured`]).

use std::fmt;

/// What a criterion looks at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    /// A latency percentile (50, 99, 99.9...) in milliseconds.
    Percentile(f64),
    MeanLatency,
    MaxLatency,
    /// Failed requests as a percentage of all.
    ErrorRate,
    Rps,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Comparison {
    Below,
    Above,
}

/// One criterion, e.g. `p99 < 500 ms`.
#[derive(Clone, Debug, PartialEq)]
pub struct Criterion {
    pub metric: Metric,
    pub comparison: Comparison,
    /// Milliseconds, percent or requests per second, by metric.
    pub limit: f64,
    /// As the user wrote it.
    pub text: String,
}

impl fmt::Display for Criterion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn parse_latency_ms(text: &str) -> Option<f64> {
    let d = humantime::parse_duration(text.trim()).ok()?;
    Some(d.as_secs_f64() * 1000.0)
}

/// Splits `name<value` or `name>value` at its comparison (the first `<`,
/// else the first `>`), both sides trimmed: the one grammar of `--slo`,
/// `--threshold` and `volley compare --fail-if`.
pub fn split_comparison(text: &str) -> Option<(&str, Comparison, &str)> {
    let text = text.trim();
    let (name, comparison, value) = if let Some((a, b)) = text.split_once('<') {
        (a, Comparison::Below, b)
    } else {
        let (a, b) = text.split_once('>')?;
        (a, Comparison::Above, b)
    };
    Some((name.trim(), comparison, value.trim()))
}

/// Whether a percentage must be written with its `%`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PercentSign {
    Required,
    Optional,
}

/// A percentage as a number: `1%`, `+10 %`, `-5%` (and `50` where the sign
/// is optional). The one reader of percentages in criteria and flags.
pub fn parse_percent(text: &str, sign: PercentSign) -> Option<f64> {
    let text = text.trim();
    let number = match (text.strip_suffix('%'), sign) {
        (Some(number), _) => number,
        (None, PercentSign::Optional) => text,
        (None, PercentSign::Required) => return None,
    };
    number.trim().parse().ok()
}

/// Parses one criterion.
// A leaf parser: its message is the value.
pub fn parse_criterion(text: &str) -> Result<Criterion, String> {
    let bad =
        || format!("invalid criterion '{text}': use e.g. p99<500ms, mean<100ms, max<2s, errors<1%, rps>5000");
    let trimmed = text.trim();
    let (name, comparison, value) = split_comparison(trimmed).ok_or_else(bad)?;
    let name = name.to_ascii_lowercase();
    let (metric, limit) = match name.as_str() {
        "errors" | "error_rate" => (
            Metric::ErrorRate,
            parse_percent(value, PercentSign::Required).ok_or_else(bad)?,
        ),
        "rps" | "throughput" => (Metric::Rps, value.parse().map_err(|_| bad())?),
        "mean" | "avg" => (Metric::MeanLatency, parse_latency_ms(value).ok_or_else(bad)?),
        "max" => (Metric::MaxLatency, parse_latency_ms(value).ok_or_else(bad)?),
        p if p.starts_with('p') => {
            let pct: f64 = p[1..].parse().map_err(|_| bad())?;
            if !(0.0..=100.0).contains(&pct) {
                return Err(bad());
            }
            (Metric::Percentile(pct), parse_latency_ms(value).ok_or_else(bad)?)
        }
        _ => return Err(bad()),
    };
    if !limit.is_finite() || limit < 0.0 {
        return Err(bad());
    }
    Ok(Criterion {
        metric,
        comparison,
        limit,
        text: trimmed.to_string(),
    })
}

/// Parses a comma-separated list of criteria.
pub fn parse_criteria(text: &str) -> Result<Vec<Criterion>, String> {
    let list: Vec<Criterion> = text
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(parse_criterion)
        .collect::<Result<_, _>>()?;
    if list.is_empty() {
        return Err(format!("no criterion in '{text}'"));
    }
    Ok(list)
}

/// The figures a criterion can look at, from a finished summary or from
/// the totals of a run still going.
pub trait Measured {
    fn requests(&self) -> u64;
    fn errors(&self) -> u64;
    fn ok(&self) -> u64;
    fn rps(&self) -> f64;
    /// A latency percentile of successful requests, in milliseconds.
    fn percentile_ms(&self, p: f64) -> f64;
    fn mean_ms(&self) -> f64;
}

/// A run still going: the totals so far and the time they took.
pub struct SoFar<'a> {
    pub snapshot: &'a crate::recorder::Snapshot,
    pub elapsed: std::time::Duration,
}

impl Measured for SoFar<'_> {
    fn requests(&self) -> u64 {
        self.snapshot.requests
    }
    fn errors(&self) -> u64 {
        self.snapshot.error_count()
    }
    fn ok(&self) -> u64 {
        self.snapshot.ok
    }
    fn rps(&self) -> f64 {
        self.snapshot.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    fn percentile_ms(&self, p: f64) -> f64 {
        self.snapshot.latency.quantile_us(p / 100.0) as f64 / 1000.0
    }
    fn mean_ms(&self) -> f64 {
        if self.snapshot.latency.is_empty() {
            0.0
        } else {
            self.snapshot.latency.hist.mean() / 1000.0
        }
    }
}

impl Criterion {
    /// The measured value this criterion looks at.
    pub fn measure(&self, m: &dyn Measured) -> f64 {
        match self.metric {
            Metric::ErrorRate => 100.0 * m.errors() as f64 / m.requests().max(1) as f64,
            Metric::Rps => m.rps(),
            Metric::MeanLatency => m.mean_ms(),
            Metric::MaxLatency => m.percentile_ms(100.0),
            Metric::Percentile(p) => m.percentile_ms(p),
        }
    }

    /// Whether the figures meet the criterion. A run without one successful
    /// request meets no latency criterion.
    pub fn holds(&self, m: &dyn Measured) -> bool {
        let latency = !matches!(self.metric, Metric::ErrorRate | Metric::Rps);
        if latency && m.ok() == 0 {
            return false;
        }
        let value = self.measure(m);
        match self.comparison {
            Comparison::Below => value < self.limit,
            Comparison::Above => value > self.limit,
        }
    }

    /// The measured value in the criterion's unit, for reports.
    pub fn describe(&self, value: f64) -> String {
        match self.metric {
            Metric::ErrorRate => format!("{value:.2}%"),
            Metric::Rps => format!("{value:.1} req/s"),
            _ => format!("{value:.3} ms"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms() {
        let c = parse_criteria("p99<500ms, errors<1%,rps>5000,mean<1s,p99.9<2s").unwrap();
        assert_eq!(c[0].metric, Metric::Percentile(99.0));
        assert_eq!((c[0].comparison, c[0].limit), (Comparison::Below, 500.0));
        assert_eq!((c[1].metric, c[1].limit), (Metric::ErrorRate, 1.0));
        assert_eq!(
            (c[2].metric, c[2].comparison, c[2].limit),
            (Metric::Rps, Comparison::Above, 5000.0)
        );
        assert_eq!((c[3].metric, c[3].limit), (Metric::MeanLatency, 1000.0));
        assert_eq!(c[4].metric, Metric::Percentile(99.9));
        for bad in ["", "p99", "p99<fast", "errors<1", "q<1ms", "p200<1ms", "rps>many"] {
            assert!(parse_criteria(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn one_grammar_for_comparisons_and_percentages() {
        assert_eq!(
            split_comparison(" p99 < 500ms "),
            Some(("p99", Comparison::Below, "500ms"))
        );
        assert_eq!(
            split_comparison("rps>+10%"),
            Some(("rps", Comparison::Above, "+10%"))
        );
        assert_eq!(split_comparison("p99=1ms"), None);
        assert_eq!(parse_percent(" +10 % ", PercentSign::Required), Some(10.0));
        assert_eq!(parse_percent("-5%", PercentSign::Required), Some(-5.0));
        assert_eq!(parse_percent("5", PercentSign::Required), None);
        assert_eq!(parse_percent("5", PercentSign::Optional), Some(5.0));
        assert_eq!(parse_percent("2.5%", PercentSign::Optional), Some(2.5));
        assert_eq!(parse_percent("lots%", PercentSign::Optional), None);
    }
}
