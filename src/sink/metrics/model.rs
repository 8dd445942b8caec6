//! What the metric outputs send, independent of any wire format: each
//! interval, the run's totals so far as labelled points (counters, gauges
//! and latency histograms), built once on the collecting thread from the
//! snapshot the collector already merged.
//!
//! Every value is cumulative since the run (one URL, plan or level) began,
//! so a lost batch costs resolution, never counts, and the shards of one
//! run add up with `sum()`.

use super::exponential::Exponential;
use crate::monitor::ProcSample;
use crate::recorder::Snapshot;
use std::sync::Arc;

/// The series volley exports, with their names in each format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Requests,
    Errors,
    Responses,
    Duration,
    ServiceDuration,
    TargetRss,
    TargetCpu,
    OpenConnections,
    InFlight,
}

impl Metric {
    /// The Prometheus name (counters end in `_total`, units in the name).
    pub fn prometheus(self) -> &'static str {
        match self {
            Metric::Requests => "volley_requests_total",
            Metric::Errors => "volley_request_errors_total",
            Metric::Responses => "volley_responses_total",
            Metric::Duration => "volley_request_duration_seconds",
            Metric::ServiceDuration => "volley_service_duration_seconds",
            Metric::TargetRss => "volley_target_resident_memory_bytes",
            Metric::TargetCpu => "volley_target_cpu_cores",
            Metric::OpenConnections => "volley_open_connections",
            Metric::InFlight => "volley_requests_in_flight",
        }
    }

    /// The OpenTelemetry name (dotted, the unit kept apart).
    pub fn otlp(self) -> &'static str {
        match self {
            Metric::Requests => "volley.requests",
            Metric::Errors => "volley.request.errors",
            Metric::Responses => "volley.responses",
            Metric::Duration => "volley.request.duration",
            Metric::ServiceDuration => "volley.service.duration",
            Metric::TargetRss => "volley.target.memory.resident",
            Metric::TargetCpu => "volley.target.cpu",
            Metric::OpenConnections => "volley.connections.open",
            Metric::InFlight => "volley.requests.in_flight",
        }
    }

    /// The unit, in UCUM as OTLP wants it.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Requests | Metric::Errors | Metric::Responses | Metric::InFlight => "{request}",
            Metric::OpenConnections => "{connection}",
            Metric::Duration | Metric::ServiceDuration => "s",
            Metric::TargetRss => "By",
            Metric::TargetCpu => "{cpu}",
        }
    }

    pub fn help(self) -> &'static str {
        match self {
            Metric::Requests => "Requests completed (successful or not).",
            Metric::Errors => "Failed requests, by kind of failure.",
            Metric::Responses => "Responses received, by status code.",
            Metric::Duration => {
                "Latency of successful requests (from the intended send under a rate), in seconds."
            }
            Metric::ServiceDuration => {
                "Service time of successful requests (from the actual send), in seconds."
            }
            Metric::TargetRss => "Resident memory of the watched target process.",
            Metric::TargetCpu => "CPU use of the watched target process, in cores.",
            Metric::OpenConnections => {
                "Established connections from volley to the target, TCP or QUIC (Linux)."
            }
            Metric::InFlight => "Requests sent and not yet answered (open model).",
        }
    }
}

/// A point's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A monotonic count since the run began.
    Count(u64),
    Gauge(f64),
    /// Shared: the scrape endpoint keeps it while the delivery threads send it.
    Histogram(Arc<Exponential>),
}

/// One labelled value.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub metric: Metric,
    /// Sorted by name; the common labels (run, item, shard, tags) included.
    pub labels: Vec<(String, String)>,
    pub value: Value,
    /// When the run this point counts from began, in Unix milliseconds.
    pub start_ms: i64,
}

/// The points of one interval, sent together.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    /// When the interval ended, in Unix milliseconds.
    pub at_ms: i64,
    pub points: Vec<Point>,
}

/// What one run's points are built from.
pub struct Source<'a> {
    /// The run's labels (run, shard, tags) without `item`.
    pub labels: &'a [(String, String)],
    pub start_ms: i64,
    /// `-R`: the service time is exported beside the latency.
    pub open_model: bool,
    /// The watched target at the interval's end.
    pub target: Option<&'a ProcSample>,
    /// volley's connections to the target at the interval's end.
    pub open_connections: Option<u64>,
}

fn with(labels: &[(String, String)], extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = labels.to_vec();
    all.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    all.sort();
    all
}

impl Source<'_> {
    /// The points of one item's totals so far.
    pub fn points(&self, item: &str, total: &Snapshot, out: &mut Vec<Point>) {
        let labels = with(self.labels, &[("item", item)]);
        let point = |metric, labels: Vec<(String, String)>, value| Point {
            metric,
            labels,
            value,
            start_ms: self.start_ms,
        };
        out.push(point(
            Metric::Requests,
            labels.clone(),
            Value::Count(total.requests),
        ));
        for (kind, n, _) in total.error_kinds() {
            let labels = with(&labels, &[("kind", kind.name())]);
            out.push(point(Metric::Errors, labels, Value::Count(n)));
        }
        for (status, n) in total.status_counts() {
            let labels = with(&labels, &[("status", &status.to_string())]);
            out.push(point(Metric::Responses, labels, Value::Count(n)));
        }
        let latency = Arc::new(Exponential::from_hdr_us(&total.latency.hist));
        out.push(point(Metric::Duration, labels.clone(), Value::Histogram(latency)));
        if self.open_model {
            let service = Arc::new(Exponential::from_hdr_us(&total.service.hist));
            out.push(point(
                Metric::ServiceDuration,
                labels.clone(),
                Value::Histogram(service),
            ));
        }
    }

    /// The points that belong to the run as a whole, not to one plan item:
    /// the target process, the connections and the requests in flight.
    /// `item` labels them like the run's other series where there is one
    /// item; a plan's are labelled by run alone.
    pub fn run_points(&self, item: Option<&str>, total: &Snapshot, out: &mut Vec<Point>) {
        let labels = match item {
            Some(item) => with(self.labels, &[("item", item)]),
            None => with(self.labels, &[]),
        };
        let gauge = |metric, value| Point {
            metric,
            labels: labels.clone(),
            value: Value::Gauge(value),
            start_ms: self.start_ms,
        };
        if let Some(target) = self.target {
            out.push(gauge(Metric::TargetRss, target.rss_mb * 1024.0 * 1024.0));
            out.push(gauge(Metric::TargetCpu, target.cpu_pct / 100.0));
        }
        if let Some(n) = self.open_connections {
            out.push(gauge(Metric::OpenConnections, n as f64));
        }
        if self.open_model && item.is_some() {
            // Sent (counted at each send under a rate) minus completed.
            let in_flight = total.pacing.sent.saturating_sub(total.requests);
            out.push(gauge(Metric::InFlight, in_flight as f64));
        }
    }
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::Recorder;
    use crate::sample::{ErrorKind, Outcome, Sample};

    #[test]
    fn a_snapshot_becomes_labelled_cumulative_points() {
        let mut rec = Recorder::default();
        for i in 0..10u64 {
            rec.record(&Sample {
                latency_us: 1000 + i,
                service_us: 900,
                bytes: 10,
                outcome: if i < 8 {
                    Outcome::Ok { status: 200 }
                } else {
                    Outcome::Failed(ErrorKind::Timeout)
                },
            });
        }
        let snap = rec.take();
        let labels = vec![("run".to_string(), "r1".to_string())];
        let source = Source {
            labels: &labels,
            start_ms: 5,
            open_model: true,
            target: None,
            open_connections: Some(3),
        };
        let mut points = Vec::new();
        source.points("0", &snap, &mut points);
        let find = |m: Metric| points.iter().find(|p| p.metric == m).unwrap();
        assert_eq!(find(Metric::Requests).value, Value::Count(snap.requests));
        assert_eq!(
            find(Metric::Requests).labels,
            vec![("item".into(), "0".into()), ("run".into(), "r1".into())]
        );
        let errors = find(Metric::Errors);
        assert_eq!(errors.value, Value::Count(snap.error_count()));
        assert!(errors.labels.contains(&("kind".into(), "timeout".into())));
        let Value::Histogram(h) = &find(Metric::Duration).value else {
            panic!("a histogram")
        };
        assert_eq!(h.count, snap.latency.hist.len());
        assert!(points.iter().any(|p| p.metric == Metric::ServiceDuration));
        let mut run = Vec::new();
        source.run_points(Some("0"), &snap, &mut run);
        let gauge = |m: Metric| run.iter().find(|p| p.metric == m).map(|p| p.value.clone());
        assert_eq!(gauge(Metric::OpenConnections), Some(Value::Gauge(3.0)));
        // Nothing was counted as sent in this snapshot: none in flight.
        assert_eq!(gauge(Metric::InFlight), Some(Value::Gauge(0.0)));
    }
}
