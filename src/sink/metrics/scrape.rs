//! `--metrics-addr ADDR`: the same series as a Prometheus scrape endpoint
//! (text exposition format 0.0.4 at `/metrics`), for setups that pull.
//!
//! The text format has no native histograms, so latency is exposed as
//! classic buckets ([`super::exponential::CLASSIC_BOUNDS`]) with `_sum`
//! and `_count`. The page is rebuilt once per interval on the collecting
//! thread; a scrape only copies it, on the endpoint's own thread
//! ([`crate::sink::endpoint`], as the dashboard's).

use super::exponential::CLASSIC_BOUNDS;
use super::model::{Metric, Point, Value};
use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::Full;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

const ORDER: [Metric; 9] = [
    Metric::Requests,
    Metric::Errors,
    Metric::Responses,
    Metric::Duration,
    Metric::ServiceDuration,
    Metric::TargetRss,
    Metric::TargetCpu,
    Metric::OpenConnections,
    Metric::InFlight,
];

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn label_text(labels: &[(String, String)], extra: Option<(&str, &str)>) -> String {
    let mut parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{v}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

/// The exposition of `points`, grouped by metric.
pub fn exposition(points: &[&Point]) -> String {
    let mut out = String::new();
    for metric in ORDER {
        let mine: Vec<&&Point> = points.iter().filter(|p| p.metric == metric).collect();
        if mine.is_empty() {
            continue;
        }
        let name = metric.prometheus();
        let kind = match mine[0].value {
            Value::Count(_) => "counter",
            Value::Gauge(_) => "gauge",
            Value::Histogram(_) => "histogram",
        };
        let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} {kind}", metric.help());
        for point in mine {
            let labels = label_text(&point.labels, None);
            match &point.value {
                Value::Count(n) => {
                    let _ = writeln!(out, "{name}{labels} {n}");
                }
                Value::Gauge(v) => {
                    let _ = writeln!(out, "{name}{labels} {v}");
                }
                Value::Histogram(h) => {
                    for (bound, count) in CLASSIC_BOUNDS.iter().zip(&h.classic) {
                        let le = label_text(&point.labels, Some(("le", &bound.to_string())));
                        let _ = writeln!(out, "{name}_bucket{le} {count}");
                    }
                    let inf = label_text(&point.labels, Some(("le", "+Inf")));
                    let _ = writeln!(out, "{name}_bucket{inf} {}", h.count);
                    let _ = writeln!(out, "{name}_sum{labels} {}", h.sum_s);
                    let _ = writeln!(out, "{name}_count{labels} {}", h.count);
                }
            }
        }
    }
    out
}

/// The endpoint; dropping it stops serving.
pub struct Endpoint {
    page: Arc<Mutex<Bytes>>,
    _running: crate::sink::endpoint::Running,
}

impl Endpoint {
    /// Binds `addr` now (a bad address fails before the run) and serves
    /// from a thread of its own.
    pub fn start(
        addr: SocketAddr,
        priority: crate::sys::ThreadPriority,
    ) -> Result<(Endpoint, SocketAddr), crate::sink::SinkError> {
        let page = Arc::new(Mutex::new(Bytes::new()));
        let served = Arc::clone(&page);
        let (running, bound) = crate::sink::endpoint::start(
            addr,
            crate::sink::endpoint::Naming {
                thread: "volley-metrics",
                label: "metrics endpoint",
                served: "metrics",
                hint: "pick another address: --metrics-addr 127.0.0.1:PORT",
                priority,
            },
            move |request| respond(request.uri().path(), &served),
        )?;
        Ok((
            Endpoint {
                page,
                _running: running,
            },
            bound,
        ))
    }

    /// Replaces what the next scrape gets.
    pub fn publish(&self, text: String) {
        *self.page.lock().unwrap_or_else(|e| e.into_inner()) = Bytes::from(text);
    }
}

fn respond(path: &str, page: &Mutex<Bytes>) -> Response<Full<Bytes>> {
    let (status, body) = if path == "/metrics" {
        (
            StatusCode::OK,
            page.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        )
    } else {
        (
            StatusCode::NOT_FOUND,
            Bytes::from_static(b"not found: metrics are at /metrics\n"),
        )
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::metrics::exponential::Exponential;

    #[test]
    fn exposition_groups_families_with_classic_buckets() {
        let labels = vec![("item".to_string(), "a \"b\"".to_string())];
        let h = Exponential {
            count: 4,
            sum_s: 0.5,
            buckets: Default::default(),
            classic: vec![4; CLASSIC_BOUNDS.len()],
        };
        let points = [
            Point {
                metric: Metric::Duration,
                labels: labels.clone(),
                value: Value::Histogram(Arc::new(h)),
                start_ms: 0,
            },
            Point {
                metric: Metric::Requests,
                labels,
                value: Value::Count(4),
                start_ms: 0,
            },
        ];
        let text = exposition(&points.iter().collect::<Vec<_>>());
        assert!(text.starts_with("# HELP volley_requests_total"), "{text}");
        assert!(
            text.contains("volley_requests_total{item=\"a \\\"b\\\"\"} 4\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE volley_request_duration_seconds histogram\n"));
        assert!(
            text.contains("volley_request_duration_seconds_bucket{item=\"a \\\"b\\\"\",le=\"+Inf\"} 4\n")
        );
        assert!(text.contains("volley_request_duration_seconds_count{item=\"a \\\"b\\\"\"} 4\n"));
    }
}
