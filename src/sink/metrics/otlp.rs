//! `--out otlp=URL`: OpenTelemetry metrics over HTTP, a protobuf
//! `ExportMetricsServiceRequest` per interval to `URL` (`/v1/metrics`
//! appended when the URL has no path).
//!
//! Temporality is cumulative: every point carries the totals since the
//! run began, as the remote-write output does. A lost or refused batch then
//! costs resolution, never counts, and a receiver that restarts mid-run
//! still sees the right totals; delta points would need every batch
//! delivered exactly once.
//!
//! The messages are declared here with prost's derive (field numbers from
//! `opentelemetry/proto/metrics/v1/metrics.proto` and its neighbours), so
//! the build needs no `protoc`.

use super::exponential::Exponential;
use super::model::{Batch, Value};
use prost::Message;

#[derive(Clone, PartialEq, Message)]
pub struct ExportMetricsServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_metrics: Vec<ResourceMetrics>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ResourceMetrics {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_metrics: Vec<ScopeMetrics>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ScopeMetrics {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<OtlpMetric>,
}

#[derive(Clone, PartialEq, Message)]
pub struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// Only the string arm of the specification's `AnyValue` is used.
#[derive(Clone, PartialEq, Message)]
pub struct AnyValue {
    #[prost(string, tag = "1")]
    pub string_value: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct OtlpMetric {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub description: String,
    #[prost(string, tag = "3")]
    pub unit: String,
    #[prost(oneof = "Data", tags = "5, 7, 10")]
    pub data: Option<Data>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Data {
    #[prost(message, tag = "5")]
    Gauge(Gauge),
    #[prost(message, tag = "7")]
    Sum(Sum),
    #[prost(message, tag = "10")]
    ExponentialHistogram(ExponentialHistogram),
}

#[derive(Clone, PartialEq, Message)]
pub struct Gauge {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Sum {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
    #[prost(int32, tag = "2")]
    pub aggregation_temporality: i32,
    #[prost(bool, tag = "3")]
    pub is_monotonic: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct NumberDataPoint {
    #[prost(message, repeated, tag = "7")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(oneof = "Number", tags = "4, 6")]
    pub value: Option<Number>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Number {
    #[prost(double, tag = "4")]
    AsDouble(f64),
    #[prost(sfixed64, tag = "6")]
    AsInt(i64),
}

#[derive(Clone, PartialEq, Message)]
pub struct ExponentialHistogram {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<ExponentialHistogramDataPoint>,
    #[prost(int32, tag = "2")]
    pub aggregation_temporality: i32,
}

#[derive(Clone, PartialEq, Message)]
pub struct ExponentialHistogramDataPoint {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(fixed64, tag = "4")]
    pub count: u64,
    #[prost(double, optional, tag = "5")]
    pub sum: Option<f64>,
    #[prost(sint32, tag = "6")]
    pub scale: i32,
    #[prost(fixed64, tag = "7")]
    pub zero_count: u64,
    #[prost(message, optional, tag = "8")]
    pub positive: Option<Buckets>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Buckets {
    /// OTLP's bucket `i` holds `(base^i, base^(i+1)]`: Prometheus's `i + 1`.
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    #[prost(uint64, repeated, tag = "2")]
    pub bucket_counts: Vec<u64>,
}

/// `AGGREGATION_TEMPORALITY_CUMULATIVE`.
const CUMULATIVE: i32 = 2;

fn attributes(labels: &[(String, String)]) -> Vec<KeyValue> {
    labels
        .iter()
        .map(|(k, v)| KeyValue {
            key: k.clone(),
            value: Some(AnyValue {
                string_value: v.clone(),
            }),
        })
        .collect()
}

fn nanos(ms: i64) -> u64 {
    (ms.max(0) as u64) * 1_000_000
}

fn exponential_point(h: &Exponential) -> (u64, Option<Buckets>) {
    let (Some((&first, _)), Some((&last, _))) = (h.buckets.first_key_value(), h.buckets.last_key_value())
    else {
        return (0, None);
    };
    let counts = (first..=last)
        .map(|i| h.buckets.get(&i).copied().unwrap_or(0))
        .collect();
    (
        h.count,
        Some(Buckets {
            offset: first - 1,
            bucket_counts: counts,
        }),
    )
}

/// The batch as one export request; each metric holds all its points.
pub fn export_request(batch: &Batch) -> ExportMetricsServiceRequest {
    let mut metrics: Vec<OtlpMetric> = Vec::new();
    for point in &batch.points {
        let (start, at) = (nanos(point.start_ms), nanos(batch.at_ms));
        let number = |value| NumberDataPoint {
            attributes: attributes(&point.labels),
            start_time_unix_nano: start,
            time_unix_nano: at,
            value: Some(value),
        };
        let index = match metrics.iter().position(|m| m.name == point.metric.otlp()) {
            Some(i) => i,
            None => {
                metrics.push(OtlpMetric {
                    name: point.metric.otlp().into(),
                    description: point.metric.help().into(),
                    unit: point.metric.unit().into(),
                    data: None,
                });
                metrics.len() - 1
            }
        };
        let data = &mut metrics[index].data;
        match &point.value {
            Value::Count(n) => {
                let sum = data.get_or_insert_with(|| {
                    Data::Sum(Sum {
                        data_points: Vec::new(),
                        aggregation_temporality: CUMULATIVE,
                        is_monotonic: true,
                    })
                });
                if let Data::Sum(sum) = sum {
                    sum.data_points.push(number(Number::AsInt(*n as i64)));
                }
            }
            Value::Gauge(v) => {
                let gauge = data.get_or_insert_with(|| {
                    Data::Gauge(Gauge {
                        data_points: Vec::new(),
                    })
                });
                if let Data::Gauge(gauge) = gauge {
                    gauge.data_points.push(number(Number::AsDouble(*v)));
                }
            }
            Value::Histogram(h) => {
                let hist = data.get_or_insert_with(|| {
                    Data::ExponentialHistogram(ExponentialHistogram {
                        data_points: Vec::new(),
                        aggregation_temporality: CUMULATIVE,
                    })
                });
                if let Data::ExponentialHistogram(hist) = hist {
                    let (count, positive) = exponential_point(h);
                    hist.data_points.push(ExponentialHistogramDataPoint {
                        attributes: attributes(&point.labels),
                        start_time_unix_nano: start,
                        time_unix_nano: at,
                        count,
                        sum: Some(h.sum_s),
                        scale: super::exponential::SCHEMA,
                        zero_count: 0,
                        positive,
                    });
                }
            }
        }
    }
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: attributes(&[("service.name".into(), "volley".into())]),
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "volley".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                }),
                metrics,
            }],
        }],
    }
}

/// The request body.
pub fn body(batch: &Batch) -> Vec<u8> {
    export_request(batch).encode_to_vec()
}

/// Where to post: the URL as given, or with `/v1/metrics` when it has no path.
pub fn endpoint(url: &url::Url) -> url::Url {
    let mut url = url.clone();
    if url.path() == "/" || url.path().is_empty() {
        url.set_path("/v1/metrics");
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::metrics::model::{Metric, Point};
    use std::sync::Arc;

    #[test]
    fn counts_are_cumulative_sums_and_latency_an_exponential_histogram() {
        let h = Exponential {
            count: 3,
            sum_s: 0.003,
            buckets: [(-300, 1), (-298, 2)].into_iter().collect(),
            classic: Vec::new(),
        };
        let labels = vec![("run".to_string(), "x".to_string())];
        let batch = Batch {
            at_ms: 2000,
            points: vec![
                Point {
                    metric: Metric::Requests,
                    labels: labels.clone(),
                    value: Value::Count(3),
                    start_ms: 1000,
                },
                Point {
                    metric: Metric::Duration,
                    labels,
                    value: Value::Histogram(Arc::new(h)),
                    start_ms: 1000,
                },
            ],
        };
        let decoded = ExportMetricsServiceRequest::decode(body(&batch).as_slice()).unwrap();
        let metrics = &decoded.resource_metrics[0].scope_metrics[0].metrics;
        let Some(Data::Sum(sum)) = &metrics[0].data else {
            panic!("a sum")
        };
        assert!(sum.is_monotonic && sum.aggregation_temporality == CUMULATIVE);
        assert_eq!(sum.data_points[0].value, Some(Number::AsInt(3)));
        assert_eq!(sum.data_points[0].start_time_unix_nano, 1_000_000_000);
        let Some(Data::ExponentialHistogram(hist)) = &metrics[1].data else {
            panic!("a histogram")
        };
        let buckets = hist.data_points[0].positive.as_ref().unwrap();
        assert_eq!(
            (buckets.offset, buckets.bucket_counts.clone()),
            (-301, vec![1, 0, 2])
        );
        assert_eq!(metrics[1].unit, "s");
    }

    #[test]
    fn a_bare_url_gets_the_metrics_path() {
        let url = |s: &str| url::Url::parse(s).unwrap();
        assert_eq!(endpoint(&url("http://127.0.0.1:4318")).path(), "/v1/metrics");
        assert_eq!(endpoint(&url("http://h:1/custom")).path(), "/custom");
    }
}
