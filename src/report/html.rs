//! The self-contained HTML report: charts drawn by plotters as inline SVG,
//! tables, and the plan that produced them; nothing loaded from a network.
//!
//! It is rendered from the report's JSON value, so a live run (`--html`)
//! and a saved one (`volley report run.json --html`) take the same path. A
//! short script in the page counts the points each chart drew and writes
//! the result into the page, which the CI check reads back from Chromium.

use plotters::prelude::*;
use serde_json::Value;
use std::fmt::Write as _;

const WIDTH: u32 = 860;
const HEIGHT: u32 = 300;
const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// One line of a chart.
struct Line {
    label: String,
    points: Vec<(f64, f64)>,
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Draws lines into an SVG string; `log_x` for the percentile spectrum.
fn chart(title: &str, x_desc: &str, y_desc: &str, lines: &[Line], log_x: bool) -> Result<String, String> {
    let all = lines.iter().flat_map(|l| l.points.iter());
    let (mut x_max, mut y_max) = (0f64, 0f64);
    let mut x_min = f64::MAX;
    for (x, y) in all {
        x_max = x_max.max(*x);
        x_min = x_min.min(*x);
        y_max = y_max.max(*y);
    }
    if x_min == f64::MAX {
        return Err(format!("no data for '{title}'"));
    }
    let x_max = if x_max <= x_min { x_min + 1.0 } else { x_max };
    let y_max = if y_max <= 0.0 { 1.0 } else { y_max * 1.1 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(60);
        macro_rules! draw {
            ($chart:expr) => {{
                let mut c = $chart;
                c.configure_mesh()
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .draw()
                    .map_err(|e| e.to_string())?;
                for (i, line) in lines.iter().enumerate() {
                    let colour = COLOURS[i % COLOURS.len()];
                    c.draw_series(LineSeries::new(
                        line.points.iter().copied(),
                        colour.stroke_width(2),
                    ))
                    .map_err(|e| e.to_string())?
                    .label(line.label.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                    });
                }
                c.configure_series_labels()
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .draw()
                    .map_err(|e| e.to_string())?;
            }};
        }
        if log_x {
            draw!(
                builder
                    .build_cartesian_2d((x_min.max(1.0)..x_max).log_scale(), 0f64..y_max)
                    .map_err(|e| e.to_string())?
            );
        } else {
            draw!(
                builder
                    .build_cartesian_2d(x_min.min(0.0)..x_max, 0f64..y_max)
                    .map_err(|e| e.to_string())?
            );
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

fn figure(out: &mut String, name: &str, svg: Result<String, String>) {
    match svg {
        Ok(svg) => {
            let _ = writeln!(
                out,
                "<figure class=\"chart\" data-chart=\"{name}\">{svg}</figure>"
            );
        }
        Err(e) => {
            let _ = writeln!(out, "<p class=\"nodata\">{}</p>", escape(&e));
        }
    }
}

fn series_line(run: &Value, label: &str, value: impl Fn(&Value) -> Option<f64>) -> Line {
    let rows = run["series"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    Line {
        label: label.to_string(),
        points: rows
            .iter()
            .filter_map(|r| Some((r["t_s"].as_f64()?, value(r)?)))
            .collect(),
    }
}

/// The latency percentile spectrum: x = 1 / (1 - q), log scale.
fn spectrum(run: &Value) -> Result<String, String> {
    let hist = super::histogram::decode(run["histogram"].as_str().unwrap_or_default())?;
    if hist.is_empty() {
        return Err("no successful request: no latency spectrum".to_string());
    }
    let points: Vec<(f64, f64)> = (0..=50)
        .map(|k| {
            let x = 10f64.powf(k as f64 / 10.0);
            let q = 1.0 - 1.0 / x;
            (x, hist.value_at_quantile(q) as f64 / 1000.0)
        })
        .collect();
    chart(
        "Latency by percentile",
        "1 / (1 - percentile): 10 = p90, 100 = p99, 1000 = p99.9",
        "ms",
        &[Line {
            label: "latency".into(),
            points,
        }],
        true,
    )
}

fn table(out: &mut String, head: &[&str], rows: &[Vec<String>]) {
    out.push_str("<table><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{}</td>", escape(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>\n");
}

fn f(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("-".to_string(), |x| format!("{x:.digits$}"))
}

fn run_section(out: &mut String, index: usize, run: &Value, open_model: bool) {
    let url = run["url"].as_str().unwrap_or("?");
    let load = run["load"]
        .as_f64()
        .map(|l| format!(" at load {l}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "<section class=\"run\"><h2>{}{}</h2>",
        escape(url),
        escape(&load)
    );
    let s = &run["summary"];
    let l = &s["latency_ms"];
    table(
        out,
        &[
            "requests",
            "ok",
            "errors",
            "elapsed s",
            "req/s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "p99.9 ms",
            "max ms",
        ],
        &[vec![
            f(&s["requests"], 0),
            f(&s["ok"], 0),
            f(&s["errors"], 0),
            f(&s["elapsed_s"], 2),
            f(&s["rps"], 1),
            f(&l["p50"], 3),
            f(&l["p90"], 3),
            f(&l["p99"], 3),
            f(&l["p999"], 3),
            f(&l["max"], 3),
        ]],
    );
    let tag = |name: &str| format!("{name}-{index}");
    figure(
        out,
        &tag("throughput"),
        chart(
            "Throughput",
            "time (s)",
            "req/s",
            // The load asked for is in req/s only in the open model.
            &if open_model {
                vec![
                    series_line(run, "req/s", |r| r["rps"].as_f64()),
                    series_line(run, "asked", |r| r["load"].as_f64()),
                ]
            } else {
                vec![series_line(run, "req/s", |r| r["rps"].as_f64())]
            },
            false,
        ),
    );
    figure(
        out,
        &tag("latency"),
        chart(
            "Latency over time",
            "time (s)",
            "ms",
            &[
                series_line(run, "p50", |r| r["p50"].as_f64()),
                series_line(run, "p90", |r| r["p90"].as_f64()),
                series_line(run, "p99", |r| r["p99"].as_f64()),
            ],
            false,
        ),
    );
    figure(out, &tag("spectrum"), spectrum(run));
    let class = |i: usize| move |r: &Value| r["status_classes"][i].as_f64();
    figure(
        out,
        &tag("outcomes"),
        chart(
            "Status codes and errors per interval",
            "time (s)",
            "responses",
            &[
                series_line(run, "2xx", class(1)),
                series_line(run, "3xx", class(2)),
                series_line(run, "4xx + 5xx", |r| {
                    Some(r["status_classes"][3].as_f64()? + r["status_classes"][4].as_f64()?)
                }),
                series_line(run, "errors (all kinds)", |r| r["errors"].as_f64()),
            ],
            false,
        ),
    );
    let statuses: Vec<Vec<String>> = s["status"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| vec![k.clone(), f(v, 0)]).collect())
        .unwrap_or_default();
    let errors: Vec<Vec<String>> = s["errors_by_kind"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    vec![
                        k.clone(),
                        f(v, 0),
                        s["error_examples"][k].as_str().unwrap_or("").to_string(),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    table(out, &["status", "count"], &statuses);
    if !errors.is_empty() {
        table(out, &["error", "count", "example"], &errors);
    }
    if run["target"].is_object() {
        figure(
            out,
            &tag("target-rss"),
            chart(
                "Target memory (RSS)",
                "time (s)",
                "MiB",
                &[series_line(run, "RSS", |r| r["target"]["rss_mb"].as_f64())],
                false,
            ),
        );
        figure(
            out,
            &tag("target-cpu"),
            chart(
                "Target CPU",
                "time (s)",
                "% of one core",
                &[series_line(run, "CPU", |r| r["target"]["cpu_pct"].as_f64())],
                false,
            ),
        );
    }
    if let Some(steps) = run["steps"].as_array().filter(|s| !s.is_empty()) {
        out.push_str("<h3>Plan steps</h3>\n");
        let rows: Vec<Vec<String>> = steps
            .iter()
            .map(|st| {
                let sm = &st["summary"];
                vec![
                    st["name"].as_str().unwrap_or("").to_string(),
                    f(&sm["requests"], 0),
                    f(&sm["errors"], 0),
                    f(&sm["rps"], 1),
                    f(&sm["latency_ms"]["p50"], 3),
                    f(&sm["latency_ms"]["p99"], 3),
                ]
            })
            .collect();
        table(
            out,
            &["step", "requests", "errors", "req/s", "p50 ms", "p99 ms"],
            &rows,
        );
    }
    out.push_str("</section>\n");
}

fn step_section(out: &mut String, step: &Value) {
    let unit = step["unit"].as_str().unwrap_or("");
    out.push_str("<section><h2>Load levels</h2>\n");
    let levels = step["levels"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let rows: Vec<Vec<String>> = levels
        .iter()
        .map(|l| {
            vec![
                f(&l["load"], 0),
                f(&l["requests"], 0),
                f(&l["rps"], 1),
                f(&l["p50_ms"], 3),
                f(&l["p99_ms"], 3),
                f(&l["error_pct"], 2),
                if l["within_slo"] == true {
                    "ok".into()
                } else {
                    "broken".into()
                },
            ]
        })
        .collect();
    table(
        out,
        &[
            &format!("load ({unit})"),
            "requests",
            "req/s",
            "p50 ms",
            "p99 ms",
            "errors %",
            "SLO",
        ],
        &rows,
    );
    let knee = |key: &str| Line {
        label: key.to_string(),
        points: levels
            .iter()
            .filter_map(|l| Some((l["load"].as_f64()?, l[key].as_f64()?)))
            .collect(),
    };
    figure(
        out,
        "levels",
        chart(
            "p99 and throughput by load level",
            unit,
            "p99 ms / req/s",
            &[knee("p99_ms"), knee("rps")],
            false,
        ),
    );
    let v = &step["verdict"];
    let max = v["max_load"]
        .as_f64()
        .map_or("none within the SLO".to_string(), |m| format!("{m} {unit}"));
    let _ = writeln!(
        out,
        "<p class=\"knee\">Maximum load: <b>{}</b> (SLO: {})</p></section>",
        escape(&max),
        escape(&step["slo"].to_string())
    );
}

/// Renders a whole report (its JSON value) as one HTML page.
pub fn render(report: &Value) -> String {
    let mut body = String::new();
    if let Some(step) = report.get("step").filter(|s| s.is_object()) {
        step_section(&mut body, step);
    }
    for (i, run) in report["runs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        run_section(&mut body, i, run, report["plan"]["rate"].is_number());
    }
    let plan = serde_json::to_string_pretty(&report["plan"]).unwrap_or_default();
    let title = format!("volley report, {}", report["started_at"].as_str().unwrap_or(""));
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; max-width: 920px; }}
table {{ border-collapse: collapse; margin: 0.8em 0; }}
td, th {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
figure.chart {{ margin: 1em 0; }}
pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; }}
</style></head>
<body>
<h1>{title}</h1>
{body}
<h2>Plan</h2>
<pre>{plan}</pre>
<pre id="chart-check"></pre>
<script>
// Counts the points each chart drew; the CI check reads the result back.
const lines = [];
let ok = true;
for (const fig of document.querySelectorAll('figure.chart')) {{
  let points = 0;
  for (const line of fig.querySelectorAll('polyline, path')) {{
    if (line.points) {{ points = Math.max(points, line.points.numberOfItems); }}
  }}
  if (points < 2) {{ ok = false; }}
  lines.push(fig.dataset.chart + ':' + points);
}}
document.getElementById('chart-check').textContent = lines.join('\n');
document.body.dataset.chartsOk = String(ok && lines.length > 0);
</script>
</body></html>
"#,
        title = escape(&title),
        plan = escape(&plan),
    )
}
