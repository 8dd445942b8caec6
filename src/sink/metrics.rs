//! Metrics where teams keep them: `--out prometheus=URL` (remote write),
//! `--out otlp=URL` (OTLP over HTTP) and `--metrics-addr ADDR` (a scrape
//! endpoint), all fed from the collector's per-interval totals.
//!
//! Once per interval, on the collecting thread, the run's totals so far
//! become one [`model::Batch`] of labelled points; each output's own thread
//! encodes and sends it ([`delivery`]), and the scrape endpoint swaps in a
//! new page. Nothing here runs per request or on an engine thread.
//!
//! Labels stay bounded: `run` (`--run-id`), `item` (a plan item's name, or
//! the URL's or level's position), `shard` when sharded, the user's
//! `--tag`s, plus `kind` on errors and `status` on responses. Never a label
//! per interpolated URL.

pub mod delivery;
pub mod exponential;
pub mod model;
pub mod otlp;
pub mod remote_write;
pub mod scrape;
pub mod sockets;

use super::{RunStart, Sink};
use crate::collector::SeriesRow;
use crate::engine::Observer;
use crate::monitor::ProcSample;
use crate::recorder::Snapshot;
use crate::report::{OutputReport, Report};
use delivery::{Delivery, EncodeError, Post, Wire};
use model::{Batch, Point, Source};
use remote_write::HistogramMode;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

/// Where a `--out` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    Prometheus,
    Otlp,
}

impl OutputKind {
    fn name(self) -> &'static str {
        match self {
            OutputKind::Prometheus => "prometheus",
            OutputKind::Otlp => "otlp",
        }
    }
}

/// What the command line asked of the metric outputs.
#[derive(Clone, Debug, Default)]
pub struct MetricsSpec {
    /// Empty only for callers that never asked (the report then has none).
    pub run_id: String,
    pub tags: Vec<(String, String)>,
    pub outputs: Vec<(OutputKind, url::Url)>,
    pub scrape: Option<SocketAddr>,
}

/// Labels volley sets itself, which a `--tag` may not replace.
const RESERVED: [&str; 6] = ["run", "item", "shard", "kind", "status", "le"];

fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__")
}

/// A fresh run id: the start time and the process id, short and unique
/// enough to tell runs apart in a dashboard.
pub fn generate_run_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mix = now.as_nanos() as u64 ^ (u64::from(std::process::id()) << 40);
    format!("{:x}-{:04x}", now.as_secs(), mix & 0xffff)
}

/// A metric flag that does not fit; the value is quoted as given.
#[derive(Debug, thiserror::Error)]
pub enum MetricsFlagError {
    #[error("--run-id is empty: give a name, e.g. --run-id nightly-42")]
    EmptyRunId,
    #[error("invalid --tag '{0}': use key=value, e.g. --tag env=staging")]
    TagForm(String),
    #[error(
        "invalid --tag '{0}': the key must be letters, digits and _ (not starting with a digit or __) and not one of {reserved}",
        reserved = RESERVED.join(", ")
    )]
    TagKey(String),
    #[error("--tag {0} is given twice: give each key once")]
    TagTwice(String),
    #[error("invalid --out '{0}': use prometheus=URL (remote write) or otlp=URL (OTLP over HTTP)")]
    Out(String),
    #[error(
        "invalid --out '{0}': the URL must be http://HOST:PORT/PATH (https receivers are not supported yet)"
    )]
    OutUrl(String),
}

impl MetricsSpec {
    /// Resolves `--run-id`, `--tag`, `--out` and `--metrics-addr`.
    pub fn parse(
        run_id: Option<&str>,
        tags: &[String],
        outputs: &[String],
        scrape: Option<SocketAddr>,
    ) -> Result<MetricsSpec, MetricsFlagError> {
        let run_id = match run_id {
            Some(id) if id.trim().is_empty() => return Err(MetricsFlagError::EmptyRunId),
            Some(id) => id.to_string(),
            None => generate_run_id(),
        };
        let mut parsed_tags: Vec<(String, String)> = Vec::new();
        for tag in tags {
            let Some((key, value)) = tag.split_once('=') else {
                return Err(MetricsFlagError::TagForm(tag.clone()));
            };
            if !valid_label_name(key) || RESERVED.contains(&key) {
                return Err(MetricsFlagError::TagKey(tag.clone()));
            }
            if parsed_tags.iter().any(|(k, _)| k == key) {
                return Err(MetricsFlagError::TagTwice(key.to_string()));
            }
            parsed_tags.push((key.to_string(), value.to_string()));
        }
        let mut parsed = Vec::new();
        for out in outputs {
            let (kind, url) = match out.split_once('=') {
                Some(("prometheus", url)) => (OutputKind::Prometheus, url),
                Some(("otlp", url)) => (OutputKind::Otlp, url),
                _ => return Err(MetricsFlagError::Out(out.clone())),
            };
            let url = url::Url::parse(url)
                .ok()
                .filter(|u| u.scheme() == "http" && u.host().is_some())
                .ok_or_else(|| MetricsFlagError::OutUrl(out.clone()))?;
            let url = match kind {
                OutputKind::Otlp => otlp::endpoint(&url),
                OutputKind::Prometheus => url,
            };
            parsed.push((kind, url));
        }
        Ok(MetricsSpec {
            run_id,
            tags: parsed_tags,
            outputs: parsed,
            scrape,
        })
    }

    /// Whether any metric leaves the process.
    pub fn any(&self) -> bool {
        !self.outputs.is_empty() || self.scrape.is_some()
    }
}

/// Remote write, with native histograms until the receiver refuses them.
struct PrometheusWire {
    mode: HistogramMode,
}

impl Wire for PrometheusWire {
    fn encode(&self, batch: &Batch) -> Result<Post, EncodeError> {
        Ok(Post {
            body: remote_write::body(batch, self.mode).map_err(EncodeError::Compress)?,
            headers: vec![
                ("content-type", "application/x-protobuf"),
                ("content-encoding", "snappy"),
                ("x-prometheus-remote-write-version", "0.1.0"),
                ("user-agent", concat!("volley/", env!("CARGO_PKG_VERSION"))),
            ],
        })
    }

    fn adapt(&mut self, status: u16, body: &str) -> bool {
        if self.mode == HistogramMode::Native && remote_write::refuses_native_histograms(status, body) {
            eprintln!(
                "warning: the Prometheus receiver refuses native histograms (start it with \
                 --enable-feature=native-histograms); sending latency as classic buckets instead"
            );
            self.mode = HistogramMode::Classic;
            return true;
        }
        false
    }

    fn mode(&self) -> Option<&'static str> {
        Some(match self.mode {
            HistogramMode::Native => "native",
            HistogramMode::Classic => "classic",
        })
    }
}

struct OtlpWire;

impl Wire for OtlpWire {
    fn encode(&self, batch: &Batch) -> Result<Post, EncodeError> {
        Ok(Post {
            body: otlp::body(batch),
            headers: vec![
                ("content-type", "application/x-protobuf"),
                ("user-agent", concat!("volley/", env!("CARGO_PKG_VERSION"))),
            ],
        })
    }
}

/// The run being exported.
struct Current {
    labels: Vec<(String, String)>,
    /// Plan items by step (a plan's per-item statistics), or one item.
    items: Items,
    start_ms: i64,
    open_model: bool,
    /// The target's addresses, to count volley's connections to them.
    addrs: Vec<SocketAddr>,
}

enum Items {
    /// `run`'s URL or `step`'s level: its position.
    Whole(String),
    /// A plan: each item's statistics under its name.
    Steps(Vec<String>),
}

/// The metric outputs and the scrape endpoint of one invocation.
pub struct Metrics {
    spec: MetricsSpec,
    deliveries: Vec<(OutputKind, url::Url, Delivery)>,
    endpoint: Option<scrape::Endpoint>,
    current: Option<Current>,
    target: Option<ProcSample>,
    /// Each item's latest points, for the scrape page (earlier runs' too).
    latest: BTreeMap<(usize, String), Vec<Point>>,
    run_index: usize,
}

impl Metrics {
    /// Starts the outputs' threads and binds the endpoint; says where.
    pub fn start(
        spec: &MetricsSpec,
        priority: crate::sys::ThreadPriority,
    ) -> Result<Metrics, super::SinkError> {
        let mut deliveries = Vec::new();
        for (kind, url) in &spec.outputs {
            let wire: Box<dyn Wire> = match kind {
                OutputKind::Prometheus => Box::new(PrometheusWire {
                    mode: HistogramMode::Native,
                }),
                OutputKind::Otlp => Box::new(OtlpWire),
            };
            deliveries.push((
                *kind,
                url.clone(),
                Delivery::start(kind.name(), url.clone(), wire, priority)?,
            ));
        }
        let endpoint = match spec.scrape {
            Some(addr) => {
                let (endpoint, bound) = scrape::Endpoint::start(addr, priority)?;
                eprintln!("metrics: http://{bound}/metrics (until the run ends)");
                if !bound.ip().is_loopback() {
                    eprintln!(
                        "warning: the metrics endpoint on {bound} is reachable from other machines (bind 127.0.0.1 to keep it local)"
                    );
                }
                Some(endpoint)
            }
            None => None,
        };
        eprintln!("run id: {} (the `run` label of every series)", spec.run_id);
        Ok(Metrics {
            spec: spec.clone(),
            deliveries,
            endpoint,
            current: None,
            target: None,
            latest: BTreeMap::new(),
            run_index: 0,
        })
    }
}

impl Observer for Metrics {
    fn row(&mut self, row: &SeriesRow, _steps: &[SeriesRow]) {
        self.target = row.target;
    }

    fn interval_snapshot(&mut self, _interval: &Snapshot, total: &Snapshot) {
        let Some(current) = &self.current else { return };
        let source = Source {
            labels: &current.labels,
            start_ms: current.start_ms,
            open_model: current.open_model,
            target: self.target.as_ref(),
            open_connections: sockets::open_connections(&current.addrs),
        };
        let mut points = Vec::new();
        match &current.items {
            Items::Whole(item) => {
                source.points(item, total, &mut points);
                source.run_points(Some(item), total, &mut points);
                self.latest.insert((self.run_index, item.clone()), points.clone());
            }
            Items::Steps(names) => {
                for (name, step) in names.iter().zip(&total.steps) {
                    let mut mine = Vec::new();
                    source.points(name, step, &mut mine);
                    self.latest.insert((self.run_index, name.clone()), mine.clone());
                    points.extend(mine);
                }
                let mut whole = Vec::new();
                source.run_points(None, total, &mut whole);
                self.latest.insert((self.run_index, String::new()), whole.clone());
                points.extend(whole);
            }
        }
        let batch = Arc::new(Batch {
            at_ms: model::now_ms(),
            points,
        });
        for (_, _, delivery) in &self.deliveries {
            delivery.offer(Arc::clone(&batch));
        }
        if let Some(endpoint) = &self.endpoint {
            let all: Vec<&Point> = self.latest.values().flatten().collect();
            endpoint.publish(scrape::exposition(&all));
        }
    }
}

impl Sink for Metrics {
    fn run_started(&mut self, run: &RunStart) {
        let mut labels = vec![("run".to_string(), self.spec.run_id.clone())];
        if let Some(shard) = &run.plan.shard {
            labels.push(("shard".to_string(), shard.index.to_string()));
        }
        labels.extend(self.spec.tags.iter().cloned());
        let items = match &run.plan.request.scenario {
            Some(scenario) if !scenario.stat_names.is_empty() => Items::Steps(scenario.stat_names.clone()),
            _ => Items::Whole(run.index.to_string()),
        };
        self.run_index = run.index;
        self.target = None;
        self.current = Some(Current {
            labels,
            items,
            start_ms: model::now_ms(),
            open_model: run.plan.load.pace.is_open(),
            addrs: run
                .plan
                .request
                .targets
                .iter()
                .flat_map(|t| t.addrs.iter().copied())
                .collect(),
        });
    }

    fn finished(&mut self, report: &mut Report) {
        for (kind, url, delivery) in &mut self.deliveries {
            let tally = delivery.finish();
            report.outputs.push(OutputReport {
                kind: kind.name().to_string(),
                url: url.to_string(),
                batches: tally.offered,
                delivered: tally.delivered,
                dropped: tally.offered - tally.delivered,
                histograms: tally.mode.map(str::to_string),
            });
        }
        self.endpoint = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_resolve_or_say_what_is_wrong() {
        let spec = MetricsSpec::parse(
            Some("r1"),
            &["env=ci".into()],
            &[
                "prometheus=http://127.0.0.1:9090/api/v1/write".into(),
                "otlp=http://127.0.0.1:4318".into(),
            ],
            None,
        )
        .unwrap();
        assert_eq!(spec.run_id, "r1");
        assert_eq!(spec.tags, vec![("env".into(), "ci".into())]);
        assert_eq!(spec.outputs[1].1.path(), "/v1/metrics");
        for (tags, outs) in [
            (vec!["novalue".to_string()], vec![]),
            (vec!["run=x".to_string()], vec![]),
            (vec!["9x=1".to_string()], vec![]),
            (vec![], vec!["kafka=http://x".to_string()]),
            (vec![], vec!["otlp=https://example.com".to_string()]),
        ] {
            let err = MetricsSpec::parse(None, &tags, &outs, None)
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("invalid --"), "{err}");
        }
        assert!(
            !MetricsSpec::parse(None, &[], &[], None)
                .unwrap()
                .run_id
                .is_empty()
        );
    }
}
