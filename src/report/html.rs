//! The self-contained HTML report: one file that opens from disk with no
//! network access, its charts drawn in the browser by our own small script.
//!
//! The page is three asset files of this repository (`page/`), built into the
//! binary; the run's data goes in as gzip + base64 of a JSON value, which the
//! page inflates with the browser's native `DecompressionStream`. It is
//! rendered from the typed [`Report`] (a run's, or one read back with
//! `Report::load`), so a live run (`--html`), a saved one (`volley report
//! run.json --html`), a merge, a comparison and the live dashboard all draw
//! through the same code.
//!
//! The latency spectrum is computed here, from the run's HdrHistogram, and
//! embedded beside the report as points: Rust already decodes the histogram,
//! and a hundred points cost less than a second decoder in JavaScript.

use super::{Report, RunReport};
use crate::histogram::EncodedHistogram;
use base64::Engine as _;
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{Value, json};
use std::io::Write as _;

const PAGE: &str = include_str!("page/page.html");
const STYLE: &str = include_str!("page/style.css");
const CHART_JS: &str = include_str!("page/chart.js");
const REPORT_JS: &str = include_str!("page/report.js");

/// Spectrum points per decade of 1 / (1 - percentile).
const POINTS_PER_DECADE: u32 = 20;
/// The spectrum goes no further than p99.999.
const DECADES: u32 = 5;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The latency percentile spectrum as `[1 / (1 - q), ms]` points, stopping
/// where the histogram holds too few values to tell the percentile apart
/// from the maximum.
pub fn spectrum_points(hist: &Histogram<u64>) -> Vec<[f64; 2]> {
    if hist.is_empty() {
        return Vec::new();
    }
    let count = hist.len() as f64;
    let mut points = Vec::new();
    for k in 0..=POINTS_PER_DECADE * DECADES {
        let x = 10f64.powf(f64::from(k) / f64::from(POINTS_PER_DECADE));
        if x > count {
            break;
        }
        let q = 1.0 - 1.0 / x;
        points.push([x, hist.value_at_quantile(q) as f64 / 1000.0]);
    }
    points
}

/// A run's latency spectrum.
pub fn run_spectrum(run: &RunReport) -> Vec<[f64; 2]> {
    spectrum_points(&run.histogram.0)
}

/// Each run's spectrum of the histogram `pick` chooses (empty where a run
/// has none).
fn spectra<P>(
    report: &Report<P>,
    pick: impl Fn(&RunReport) -> Option<&EncodedHistogram>,
) -> Vec<Vec<[f64; 2]>> {
    report
        .runs
        .iter()
        .map(|run| pick(run).map(|h| spectrum_points(&h.0)).unwrap_or_default())
        .collect()
}

fn latency(run: &RunReport) -> Option<&EncodedHistogram> {
    Some(&run.histogram)
}

fn service(run: &RunReport) -> Option<&EncodedHistogram> {
    run.service_histogram.as_ref()
}

/// A report as the JSON the page reads.
fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("report values always serialise")
}

/// gzip, then base64: what the page's `DecompressionStream('gzip')` reads.
fn pack(data: &Value) -> String {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(data.to_string().as_bytes());
    let bytes = gz.finish().unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn page(title: &str, mode: &str, data: Option<&Value>) -> String {
    let data = data.map_or(String::new(), |d| {
        format!(
            "<script id=\"volley-data\" type=\"application/octet-stream\">{}</script>",
            pack(d)
        )
    });
    PAGE.replace("{{TITLE}}", &escape(title))
        .replace("{{MODE}}", mode)
        .replace("{{DATA}}", &data)
        .replace("{{STYLE}}", STYLE)
        .replace("{{CHART}}", CHART_JS)
        .replace("{{REPORT}}", REPORT_JS)
}

/// What the page draws for a report: the report and each run's spectrum.
pub fn report_data<P: Serialize>(report: &Report<P>) -> Value {
    json!({
        "report": to_value(report),
        "spectra": spectra(report, latency),
        "service_spectra": spectra(report, service),
    })
}

/// Renders a whole report (a run's, or one read back from a file) as one
/// HTML page.
pub fn render<P: Serialize>(report: &Report<P>) -> String {
    let title = format!("volley report, {}", report.started_at);
    page(&title, "report", Some(&report_data(report)))
}

/// One pair of compared runs: their URLs and the compared metrics.
pub struct ComparedPair<'a> {
    pub url_a: &'a str,
    pub url_b: &'a str,
    pub rows: &'a [super::verdicts::Row],
}

/// Renders `volley compare`: both reports overlaid, with the verdicts.
pub fn render_compare<P: Serialize>(
    a: &Report<P>,
    b: &Report<P>,
    names: [&str; 2],
    pairs: &[ComparedPair],
) -> String {
    let pairs: Vec<Value> = pairs
        .iter()
        .map(|p| {
            let rows: Vec<Value> = p
                .rows
                .iter()
                .map(|r| {
                    json!({
                        "metric": r.metric, "a": r.a, "b": r.b, "change_pct": r.change_pct,
                        "p_value": r.p_value, "significant": r.significant,
                        "within_noise": r.within_noise, "higher_is_worse": r.higher_is_worse,
                    })
                })
                .collect();
            json!({ "url_a": p.url_a, "url_b": p.url_b, "rows": rows })
        })
        .collect();
    let data = json!({ "compare": {
        "a": to_value(a), "b": to_value(b), "names": names, "pairs": pairs,
        "spectra_a": spectra(a, latency), "spectra_b": spectra(b, latency),
    }});
    page(
        &format!("volley comparison, {} and {}", names[0], names[1]),
        "report",
        Some(&data),
    )
}

/// The live dashboard's page: the same script, fed by Server-Sent Events.
pub fn live_page() -> String {
    page("volley, live", "live", None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn the_embedded_data_inflates_back_to_the_report() {
        use clap::Parser as _;
        let crate::cli::Command::Run(args) =
            crate::cli::Cli::parse_from(["volley", "run", "http://127.0.0.1:9/"]).command
        else {
            unreachable!("a run command")
        };
        let plan = crate::plan::Plan::from_args(&args).unwrap();
        let report = Report::new(plan, std::time::SystemTime::now());
        let html = render(&report);
        let start = html.find("type=\"application/octet-stream\">").unwrap() + 32;
        let end = start + html[start..].find("</script>").unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&html[start..end])
            .unwrap();
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["report"], to_value(&report));
        assert_eq!(back["report"]["plan"]["targets"][0]["url"], "http://127.0.0.1:9/");
        assert_eq!(back["spectra"], json!([]));
        assert!(!html.contains("{{"), "every placeholder was filled");
    }

    #[test]
    fn the_spectrum_stops_where_the_data_does() {
        let mut hist = Histogram::<u64>::new(3).unwrap();
        for us in 1..=1000u64 {
            hist.record(us * 1000).unwrap();
        }
        let points = spectrum_points(&hist);
        // x runs from 1 (p0) to 1000 (p99.9): 3 decades of 20 points.
        assert_eq!(points.len(), 61);
        assert_eq!(points[0][0], 1.0);
        let p99 = points.iter().find(|p| (p[0] - 100.0).abs() < 1e-6).unwrap();
        assert!((p99[1] - 990.0).abs() < 2.0, "{p99:?}");
        assert!(points.windows(2).all(|w| w[1][1] >= w[0][1]));
    }
}
