//! `volley compare A.json B.json`: is B different from A, beyond noise?
//!
//! Throughput and mean latency are compared with Welch's t-test over the
//! per-interval series. Consecutive intervals are not independent samples
//! (a slow second tends to follow a slow second), so each series' standard
//! error uses an effective sample size corrected for its lag-1
//! autocorrelation. Percentiles get rank-based confidence intervals from the
//! saved histograms (significant when the intervals do not overlap) and a
//! test of the fraction of each run beyond the quantile (which sees a tail
//! that no request of B escapes however few requests A's p99 rests on), and
//! the error rates a two-proportion z-test.
//!
//! Statistics alone call a 0.5% shift "significant" once intervals are many
//! and steady, and two runs of one build differ by that much (the machine
//! drifts between them). As criterion.rs does, a change must also pass a
//! noise threshold (`--noise`, 2% by default) to count.

use crate::collector::SeriesRow;
pub use crate::report::verdicts::Row;
use crate::report::{Latency, LoadError, RunReport, SavedReport};
use crate::slo::{Comparison, PercentSign, parse_percent, split_comparison};
use statrs::distribution::{ContinuousCDF, StudentsT};
use std::fmt::Write as _;

/// Below this p-value a change is called significant.
pub const ALPHA: f64 = 0.05;

/// Below this p-value the fraction of requests beyond a quantile tells two
/// runs apart (`tail_test`). Stricter than [`ALPHA`]: slow requests come
/// in clusters, so the counts are less independent than the test assumes,
/// and two runs of one target differ there by more than it expects. A tail
/// that every request of B lies beyond is far past this level.
pub const TAIL_ALPHA: f64 = 0.001;

/// A `--fail-if` rule: `p99>+10%`.
#[derive(Clone, Debug, PartialEq)]
pub struct FailIf {
    pub metric: String,
    pub above: bool,
    pub pct: f64,
    pub text: String,
}

/// A `--fail-if` rule that does not parse.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FailIfError {
    #[error("invalid --fail-if '{0}': use e.g. p99>+10%, rps<-5%, mean>+20%")]
    Syntax(String),
    #[error(
        "invalid --fail-if '{0}': use e.g. p99>+10%, rps<-5%, mean>+20% (metrics: {metrics})",
        metrics = METRICS.join(", ")
    )]
    Metric(String),
}

pub fn parse_fail_if(text: &str) -> Result<FailIf, FailIfError> {
    let bad = || FailIfError::Syntax(text.to_string());
    let t = text.trim();
    let (metric, comparison, rest) = split_comparison(t).ok_or_else(bad)?;
    let metric = metric.to_ascii_lowercase();
    if !METRICS.contains(&metric.as_str()) {
        return Err(FailIfError::Metric(text.to_string()));
    }
    let pct = parse_percent(rest, PercentSign::Required).ok_or_else(bad)?;
    Ok(FailIf {
        metric,
        above: comparison == Comparison::Above,
        pct,
        text: t.to_string(),
    })
}

const METRICS: [&str; 9] = [
    "rps", "mean", "p50", "p90", "p99", "errors", "max", "tgt_rss", "tgt_cpu",
];

/// Mean, variance and lag-1-corrected effective size of a series.
fn series_stats(values: &[f64]) -> Option<(f64, f64, f64)> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n as f64 - 1.0);
    let lag1 = if var > 0.0 {
        values
            .windows(2)
            .map(|w| (w[0] - mean) * (w[1] - mean))
            .sum::<f64>()
            / ((n as f64 - 1.0) * var)
    } else {
        0.0
    };
    // Only positive autocorrelation shrinks the information; cap it so the
    // effective size stays at least 1.
    let rho = lag1.clamp(0.0, 0.95);
    let n_eff = (n as f64 * (1.0 - rho) / (1.0 + rho)).max(1.0);
    Some((mean, var, n_eff))
}

/// Welch's t-test with autocorrelation-corrected standard errors; the
/// two-sided p-value.
pub fn welch(a: &[f64], b: &[f64]) -> Option<f64> {
    let (ma, va, na) = series_stats(a)?;
    let (mb, vb, nb) = series_stats(b)?;
    let (sa, sb) = (va / na, vb / nb);
    let se = (sa + sb).sqrt();
    if se == 0.0 {
        return Some(if ma == mb { 1.0 } else { 0.0 });
    }
    let t = (ma - mb) / se;
    let df_den = sa * sa / (na - 1.0).max(1.0) + sb * sb / (nb - 1.0).max(1.0);
    let df = if df_den > 0.0 {
        ((sa + sb).powi(2) / df_den).max(1.0)
    } else {
        1.0
    };
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(2.0 * (1.0 - dist.cdf(t.abs())))
}

/// A 95% interval for quantile `q` from a histogram, by ranks.
fn quantile_interval(hist: &hdrhistogram::Histogram<u64>, q: f64) -> Option<(f64, f64)> {
    let n = hist.len() as f64;
    if n < 1.0 {
        return None;
    }
    let half = 1.96 * (n * q * (1.0 - q)).sqrt();
    let lo = ((n * q - half) / n).clamp(0.0, 1.0);
    let hi = ((n * q + half) / n).clamp(0.0, 1.0);
    Some((
        hist.value_at_quantile(lo) as f64 / 1000.0,
        hist.value_at_quantile(hi) as f64 / 1000.0,
    ))
}

/// Whether the runs differ at quantile `q` by the fraction of each beyond
/// it: `x` is the lower of the two runs' q-quantiles, and a two-proportion
/// test compares how many of A's and of B's requests were slower than `x`
/// (about `1 - q` of the run that set `x`, and as many of the other if the
/// runs are alike). It uses both histograms whole: where every one of B's
/// requests is slower than A's p99, that is 100% against 1%, however few
/// of A's requests its p99 rests on, whose rank interval one stall can
/// stretch to A's slowest. The two-sided p-value; `None` for an empty run.
fn tail_test(a: &hdrhistogram::Histogram<u64>, b: &hdrhistogram::Histogram<u64>, q: f64) -> Option<f64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let x = a.value_at_quantile(q).min(b.value_at_quantile(q));
    // `count_between` counts whole buckets: x's own bucket is not beyond it.
    let beyond = |h: &hdrhistogram::Histogram<u64>| (h.len() - h.count_between(0, x)) as f64;
    proportions(beyond(a), a.len() as f64, beyond(b), b.len() as f64)
}

/// Two-proportion z-test on error counts; the two-sided p-value.
fn proportions(errors_a: f64, n_a: f64, errors_b: f64, n_b: f64) -> Option<f64> {
    if n_a < 1.0 || n_b < 1.0 {
        return None;
    }
    let pooled = (errors_a + errors_b) / (n_a + n_b);
    let se = (pooled * (1.0 - pooled) * (1.0 / n_a + 1.0 / n_b)).sqrt();
    if se == 0.0 {
        return Some(1.0);
    }
    let z = ((errors_a / n_a) - (errors_b / n_b)) / se;
    let normal = statrs::distribution::Normal::new(0.0, 1.0).ok()?;
    Some(2.0 * (1.0 - normal.cdf(z.abs())))
}

fn change(a: f64, b: f64) -> f64 {
    if a == 0.0 {
        if b == 0.0 { 0.0 } else { 100.0 }
    } else {
        100.0 * (b - a) / a
    }
}

/// A figure of every full row of a run's series.
fn series(run: &RunReport, figure: impl Fn(&SeriesRow) -> Option<f64>) -> Vec<f64> {
    let rows = run.series.as_slice();
    // The last row may be a partial interval; leave it out of the test.
    let full = if rows.len() > 2 {
        &rows[..rows.len() - 1]
    } else {
        rows
    };
    full.iter().filter_map(figure).collect()
}

/// Reads one figure of a latency summary.
type LatencyFigure = fn(&Latency) -> f64;
/// Reads one figure of a series row.
type RowFigure = fn(&SeriesRow) -> Option<f64>;
/// A 95% interval of a percentile, in ms, where the run has one.
type Interval = Option<(f64, f64)>;

/// Whether a percentile differs between two runs: their 95% rank
/// intervals do not overlap or the fraction beyond it differs (`tail`, the
/// p-value of [`tail_test`], below [`TAIL_ALPHA`]) and, where both runs
/// have the intervals for a test (`p`, Welch's over the per-interval
/// values of that percentile), the per-interval values differ too. Both
/// whole-run tests assume independent samples, but slow requests come in
/// clusters (one slow moment of the machine or the target delays several
/// at once), so on their own they take two runs of one target for
/// different at the tail.
fn percentile_differs(intervals: (Interval, Interval), tail: Option<f64>, p: Option<f64>) -> bool {
    let apart = match intervals {
        (Some((lo_a, hi_a)), Some((lo_b, hi_b))) => hi_a < lo_b || hi_b < lo_a,
        _ => false,
    };
    let beyond = tail.is_some_and(|t| t < TAIL_ALPHA);
    (apart || beyond) && p.is_none_or(|p| p < ALPHA)
}

/// Compares one run of each report; changes smaller than `noise_pct`
/// percent are never significant.
pub fn compare_runs(a: &RunReport, b: &RunReport, noise_pct: f64) -> Vec<Row> {
    let (sa, sb) = (&a.summary, &b.summary);
    let mut rows = Vec::new();
    let mut push = |metric, va: f64, vb: f64, p_value: Option<f64>, tested: bool, worse_up: bool| {
        let change_pct = change(va, vb);
        let within_noise = tested && change_pct.abs() < noise_pct;
        rows.push(Row {
            metric,
            a: va,
            b: vb,
            change_pct,
            p_value,
            significant: tested && !within_noise,
            within_noise,
            higher_is_worse: worse_up,
        });
    };
    let p = welch(&series(a, |r| Some(r.rps)), &series(b, |r| Some(r.rps)));
    push("rps", sa.rps, sb.rps, p, p.is_some_and(|p| p < ALPHA), false);
    let p = welch(&series(a, |r| Some(r.mean)), &series(b, |r| Some(r.mean)));
    push(
        "mean",
        sa.latency_ms.mean,
        sb.latency_ms.mean,
        p,
        p.is_some_and(|p| p < ALPHA),
        true,
    );
    let percentiles: [(&str, f64, LatencyFigure, RowFigure); 3] = [
        ("p50", 0.5, |l| l.p50, |r| Some(r.p50)),
        ("p90", 0.9, |l| l.p90, |r| Some(r.p90)),
        ("p99", 0.99, |l| l.p99, |r| Some(r.p99)),
    ];
    for (metric, q, figure, per_interval) in percentiles {
        let intervals = (
            quantile_interval(&a.histogram.0, q),
            quantile_interval(&b.histogram.0, q),
        );
        let tail = tail_test(&a.histogram.0, &b.histogram.0, q);
        let p = welch(&series(a, per_interval), &series(b, per_interval));
        push(
            metric,
            figure(&sa.latency_ms),
            figure(&sb.latency_ms),
            p,
            percentile_differs(intervals, tail, p),
            true,
        );
    }
    let (ea, na) = (sa.errors as f64, sa.requests as f64);
    let (eb, nb) = (sb.errors as f64, sb.requests as f64);
    let p = proportions(ea, na, eb, nb);
    let rate = |e: f64, n: f64| if n > 0.0 { 100.0 * e / n } else { 0.0 };
    push(
        "errors",
        rate(ea, na),
        rate(eb, nb),
        p,
        p.is_some_and(|p| p < ALPHA),
        true,
    );
    push("max", sa.latency_ms.max, sb.latency_ms.max, None, false, true);
    // The watched target, when both runs watched one.
    if let (Some(ta), Some(tb)) = (&a.target, &b.target) {
        let rss = |r: &SeriesRow| r.target.map(|t| t.rss_mb);
        let p = welch(&series(a, rss), &series(b, rss));
        push(
            "tgt_rss",
            ta.peak_rss_mb,
            tb.peak_rss_mb,
            p,
            p.is_some_and(|p| p < ALPHA),
            true,
        );
        let cpu = |r: &SeriesRow| r.target.map(|t| t.cpu_pct);
        let p = welch(&series(a, cpu), &series(b, cpu));
        push(
            "tgt_cpu",
            ta.mean_cpu_pct,
            tb.mean_cpu_pct,
            p,
            p.is_some_and(|p| p < ALPHA),
            true,
        );
    }
    rows
}

/// Whether a row breaks a `--fail-if` rule: the change passes the limit in
/// the rule's direction and is significant.
pub fn breaks(row: &Row, rule: &FailIf) -> bool {
    row.metric == rule.metric
        && row.significant
        && if rule.above {
            row.change_pct > rule.pct
        } else {
            row.change_pct < rule.pct
        }
}

/// The comparison table.
pub fn render(url_a: &str, url_b: &str, rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A: {url_a}\nB: {url_b}");
    let _ = writeln!(
        out,
        "{:<8} {:>12} {:>12} {:>9} {:>9}  verdict",
        "metric", "A", "B", "change", "p"
    );
    // Latencies in ms; percentile verdicts come from the histograms'
    // confidence intervals (no p-value), the rest from the tests.
    for r in rows {
        let label = match r.metric {
            "rps" => "req/s",
            "errors" => "errors %",
            "tgt_rss" => "tgt MiB",
            "tgt_cpu" => "tgt cpu%",
            other => other,
        };
        let verdict = if r.within_noise {
            "within noise"
        } else if !r.significant {
            "not significant"
        } else if (r.change_pct > 0.0) == r.higher_is_worse {
            "significant: worse"
        } else {
            "significant: better"
        };
        let p = r.p_value.map_or("(CI)".to_string(), |p| format!("{p:.3}"));
        let _ = writeln!(
            out,
            "{label:<8} {:>12.3} {:>12.3} {:>+8.1}% {p:>9}  {verdict}",
            r.a, r.b, r.change_pct
        );
    }
    out
}

/// Why `volley compare` could not answer.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("{0}")]
    FailIf(FailIfError),
    #[error("invalid --noise '{0}': use e.g. 2%")]
    Noise(String),
    #[error(transparent)]
    Report(#[from] LoadError),
    #[error("a report has no runs to compare")]
    NoRuns,
    /// The HTML page could not be written.
    #[error("cannot write '{0}'")]
    Write(String, #[source] std::io::Error),
}

impl CompareError {
    /// A bad flag or an unreadable report, as opposed to a page that could
    /// not be written.
    pub fn is_usage(&self) -> bool {
        !matches!(self, CompareError::Write(..))
    }
}

/// `volley compare`: prints each run pair's table (and writes `--html`);
/// false when a `--fail-if` rule is broken by a significant change.
pub fn command(args: &crate::cli::CompareArgs) -> Result<bool, CompareError> {
    let rules = args
        .fail_if
        .iter()
        .map(|r| parse_fail_if(r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(CompareError::FailIf)?;
    let noise = match parse_percent(&args.noise, PercentSign::Optional) {
        Some(n) if n >= 0.0 => n,
        _ => return Err(CompareError::Noise(args.noise.clone())),
    };
    let (a, b) = (SavedReport::load(&args.a)?, SavedReport::load(&args.b)?);
    let (runs_a, runs_b) = (&a.runs, &b.runs);
    if runs_a.is_empty() || runs_b.is_empty() {
        return Err(CompareError::NoRuns);
    }
    let mut broken = Vec::new();
    let mut compared = Vec::new();
    for (ra, rb) in runs_a.iter().zip(runs_b.iter()) {
        let rows = compare_runs(ra, rb, noise);
        print!("{}", render(&ra.url, &rb.url, &rows));
        for rule in &rules {
            if let Some(row) = rows.iter().find(|r| breaks(r, rule)) {
                broken.push(format!("{} ({:+.1}%)", rule.text, row.change_pct));
            }
        }
        println!();
        compared.push((ra, rb, rows));
    }
    if let Some(path) = &args.html {
        let pairs: Vec<_> = compared
            .iter()
            .map(|(ra, rb, rows)| crate::report::html::ComparedPair {
                url_a: ra.url.as_str(),
                url_b: rb.url.as_str(),
                rows,
            })
            .collect();
        let names = [args.a.display().to_string(), args.b.display().to_string()];
        let page = crate::report::html::render_compare(&a, &b, [&names[0], &names[1]], &pairs);
        std::fs::write(path, page).map_err(|e| CompareError::Write(path.display().to_string(), e))?;
    }
    if runs_a.len() != runs_b.len() {
        println!(
            "note: A has {} runs and B {}; compared the first {}",
            runs_a.len(),
            runs_b.len(),
            runs_a.len().min(runs_b.len())
        );
    }
    if !broken.is_empty() {
        println!("failed: {}", broken.join(", "));
    }
    Ok(broken.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welch_separates_shifted_series_and_not_equal_ones() {
        let a: Vec<f64> = (0..30).map(|i| 100.0 + (i % 5) as f64).collect();
        let b: Vec<f64> = (0..30).map(|i| 110.0 + (i % 5) as f64).collect();
        assert!(welch(&a, &b).unwrap() < 0.001);
        let c: Vec<f64> = (0..30).map(|i| 100.0 + ((i + 2) % 5) as f64).collect();
        assert!(welch(&a, &c).unwrap() > 0.5);
    }

    #[test]
    fn a_percentile_differs_only_where_its_intervals_agree() {
        let apart = (Some((12.0, 12.4)), Some((13.0, 13.4)));
        let overlapping = (Some((12.0, 13.1)), Some((13.0, 13.4)));
        // Apart, and the per-interval values differ too (or there are too
        // few intervals to say): significant.
        assert!(percentile_differs(apart, None, Some(0.001)));
        assert!(percentile_differs(apart, None, None));
        // Apart, but interval by interval the runs are alike: a cluster of
        // slow requests in one run, not a different target.
        assert!(!percentile_differs(apart, None, Some(0.4)));
        assert!(!percentile_differs(overlapping, None, Some(0.001)));
        assert!(!percentile_differs((None, Some((1.0, 2.0))), None, None));
        // The fraction beyond the quantile tells them apart where the
        // intervals overlap, still only where the intervals' values agree.
        assert!(percentile_differs(overlapping, Some(1e-9), Some(0.001)));
        assert!(!percentile_differs(overlapping, Some(1e-9), Some(0.4)));
        assert!(!percentile_differs(overlapping, Some(0.01), Some(0.001)));
    }

    /// A histogram of `count` requests at each of `values` (microseconds).
    fn histogram(values: &[(u64, u64)]) -> hdrhistogram::Histogram<u64> {
        let mut hist = crate::recorder::new_latency_histogram();
        for &(us, count) in values {
            hist.record_n(us, count).unwrap();
        }
        hist
    }

    /// `/sleep/10` against `/sleep/40` at -c 4 for 2 s, where one stall of
    /// the machine delayed each of A's four connections once, to 47 ms:
    /// A's p99 rank interval reaches its slowest requests and overlaps B's,
    /// though every one of B's requests is slower than A's p99.
    #[test]
    fn a_tail_that_no_request_of_b_escapes_is_significant() {
        let a = histogram(&[(11_000, 700), (13_000, 16), (47_000, 4)]);
        let b = histogram(&[(41_000, 150), (42_000, 40)]);
        let intervals = (quantile_interval(&a, 0.99), quantile_interval(&b, 0.99));
        let (hi_a, lo_b) = (intervals.0.unwrap().1, intervals.1.unwrap().0);
        assert!(hi_a >= lo_b, "the rank intervals overlap: {intervals:?}");
        // A's p99 per 200 ms interval, the stall's interval among them.
        let per_a = [11.2, 11.5, 12.0, 47.0, 11.8, 12.1, 11.4, 11.9, 12.3];
        let per_b = [41.2, 41.5, 41.3, 42.0, 41.4, 41.6, 41.2, 41.9, 41.3];
        let p = welch(&per_a, &per_b);
        assert!(p.unwrap() < ALPHA, "{p:?}");
        let tail = tail_test(&a, &b, 0.99);
        assert!(tail.unwrap() < 1e-12, "{tail:?}");
        assert!(percentile_differs(intervals, tail, p));
        // The other way round, B faster: as significant.
        let back = (intervals.1, intervals.0);
        assert!(percentile_differs(
            back,
            tail_test(&b, &a, 0.99),
            welch(&per_b, &per_a)
        ));
    }

    /// Two runs of one target, one with a few more slow requests: the
    /// fraction beyond the p99 does not tell them apart.
    #[test]
    fn two_runs_alike_do_not_differ_beyond_the_quantile() {
        let a = histogram(&[(11_000, 700), (12_000, 13), (14_000, 7)]);
        let b = histogram(&[(11_000, 690), (12_000, 18), (14_000, 12)]);
        let tail = tail_test(&a, &b, 0.99).unwrap();
        assert!(tail > TAIL_ALPHA, "{tail}");
        assert!(tail_test(&a, &crate::recorder::new_latency_histogram(), 0.99).is_none());
    }

    #[test]
    fn autocorrelation_widens_the_error() {
        // A slow drift: strongly autocorrelated, so fewer effective samples.
        let drift: Vec<f64> = (0..40).map(|i| i as f64).collect();
        let noise: Vec<f64> = (0..40).map(|i| if i % 2 == 0 { 0.0 } else { 39.0 }).collect();
        let (_, _, n_drift) = series_stats(&drift).unwrap();
        let (_, _, n_noise) = series_stats(&noise).unwrap();
        assert!(n_drift < 5.0, "{n_drift}");
        assert_eq!(n_noise, 40.0, "negative autocorrelation is not rewarded");
    }

    #[test]
    fn fail_if_rules() {
        let rule = parse_fail_if("p99>+10%").unwrap();
        assert_eq!((rule.metric.as_str(), rule.above, rule.pct), ("p99", true, 10.0));
        let row = Row {
            metric: "p99",
            a: 10.0,
            b: 12.0,
            change_pct: 20.0,
            p_value: None,
            significant: true,
            within_noise: false,
            higher_is_worse: true,
        };
        assert!(breaks(&row, &rule));
        assert!(
            !breaks(
                &Row {
                    significant: false,
                    ..row.clone()
                },
                &rule
            ),
            "noise never fails"
        );
        assert!(!breaks(
            &Row {
                change_pct: 5.0,
                ..row
            },
            &rule
        ));
        assert!(parse_fail_if("p42>+1%").is_err());
        assert!(parse_fail_if("p99>10").is_err());
        assert_eq!(parse_fail_if("rps<-5%").unwrap().pct, -5.0);
    }

    #[test]
    fn proportions_test() {
        assert!(proportions(0.0, 1000.0, 100.0, 1000.0).unwrap() < 0.001);
        assert!(proportions(10.0, 1000.0, 11.0, 1000.0).unwrap() > 0.5);
    }
}
