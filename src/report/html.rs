//! The self-contained HTML report: one file that opens from disk with no
//! network access, its charts drawn in the browser by our own small script.
//!
//! The page is three asset files of this repository (`page/`), built into the
//! binary; the run's data goes in as gzip + base64 of a JSON value, which the
//! page inflates with the browser's native `DecompressionStream`. It is
//! rendered from the report's JSON value, so a live run (`--html`), a saved
//! one (`volley report run.json --html`), a comparison and the live dashboard
//! all draw through the same code.
//!
//! The latency spectrum is computed here, from the run's HdrHistogram, and
//! embedded beside the report as points: Rust already decodes the histogram,
//! and a hundred points cost less than a second decoder in JavaScript.

use base64::Engine as _;
use hdrhistogram::Histogram;
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

/// A run's spectrum from its encoded histogram under `field` (empty when
/// it has none): `histogram` (latency) or `service_histogram`.
fn encoded_spectrum(run: &Value, field: &str) -> Vec<[f64; 2]> {
    run[field]
        .as_str()
        .and_then(|text| super::histogram::decode(text).ok())
        .map(|h| spectrum_points(&h))
        .unwrap_or_default()
}

/// A run's latency spectrum, from its JSON value.
pub fn run_spectrum(run: &Value) -> Vec<[f64; 2]> {
    encoded_spectrum(run, "histogram")
}

/// Each run's spectrum from the histogram under `field`.
fn spectra(report: &Value, field: &str) -> Vec<Vec<[f64; 2]>> {
    report["runs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|run| encoded_spectrum(run, field))
        .collect()
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
pub fn report_data(report: &Value) -> Value {
    json!({
        "report": report,
        "spectra": spectra(report, "histogram"),
        "service_spectra": spectra(report, "service_histogram"),
    })
}

/// Renders a whole report (its JSON value) as one HTML page.
pub fn render(report: &Value) -> String {
    let title = format!("volley report, {}", report["started_at"].as_str().unwrap_or(""));
    page(&title, "report", Some(&report_data(report)))
}

/// One pair of compared runs: their URLs and the compared metrics.
pub struct ComparedPair<'a> {
    pub url_a: &'a str,
    pub url_b: &'a str,
    pub rows: &'a [crate::compare::Row],
}

/// Renders `volley compare`: both reports overlaid, with the verdicts.
pub fn render_compare(a: &Value, b: &Value, names: [&str; 2], pairs: &[ComparedPair]) -> String {
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
        "a": a, "b": b, "names": names, "pairs": pairs,
        "spectra_a": spectra(a, "histogram"), "spectra_b": spectra(b, "histogram"),
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
        let report = json!({"started_at": "now", "runs": [{"url": "http://x/", "histogram": ""}]});
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
        assert_eq!(back["report"], report);
        assert_eq!(back["spectra"], json!([[]]));
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
