//! The plan as every report records it: one flat JSON object.
//!
//! In memory a [`Plan`] is grouped by concern; on disk it keeps the flat
//! keys, in the order reports have always had them (saved reports are read
//! back, merged and compared, and a plan's hash is taken over this JSON).
//! The groups interleave in that order (`threads` sits between `scenario`
//! and `requests`), so `#[serde(flatten)]` on the groups cannot give it;
//! [`Recorded`] lists the keys once, in order, borrowing from the groups.

use super::{HttpVersion, Pace, Plan, StatusSet, Warmup, shard::Shard};
use crate::shape::Stage;
use crate::target::Target;
use serde::{Serialize, Serializer};
use std::time::Duration;

/// The report's view of a plan: its keys, in their order.
#[derive(Serialize)]
struct Recorded<'a> {
    targets: &'a [Target],
    connections: usize,
    rate: Option<f64>,
    stages: &'a Option<Vec<Stage>>,
    max_connections: Option<usize>,
    #[serde(rename = "rampup_s", serialize_with = "opt_secs")]
    rampup: Option<Duration>,
    #[serde(serialize_with = "scenario_file")]
    scenario: &'a Option<std::sync::Arc<crate::scenario::Scenario>>,
    threads: usize,
    requests: Option<u64>,
    #[serde(rename = "duration_s", serialize_with = "opt_secs")]
    duration: Option<Duration>,
    warmup: Option<Warmup>,
    #[serde(rename = "delay_s", serialize_with = "secs")]
    delay: Duration,
    method: &'a str,
    headers: &'a [(String, String)],
    #[serde(serialize_with = "body_text")]
    body: &'a [u8],
    #[serde(rename = "expected_status")]
    success: &'a StatusSet,
    #[serde(rename = "timeout_s", serialize_with = "secs")]
    timeout: Duration,
    #[serde(rename = "connect_timeout_s", serialize_with = "secs")]
    connect_timeout: Duration,
    connect_to: &'a Option<String>,
    keepalive: bool,
    pipeline: u32,
    /// `--insecure`, `--cacert`...: top-level keys of the plan.
    #[serde(flatten)]
    tls: &'a crate::tls::TlsOptions,
    http: HttpVersion,
    streams: usize,
    /// Left out when off, so plans recorded before the flag existed keep
    /// their hash.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    coalesce: bool,
    #[serde(rename = "interval_s", serialize_with = "secs")]
    interval: Duration,
    monitor_pid: Option<u32>,
    spawn: &'a Option<String>,
    #[serde(serialize_with = "criteria_text")]
    thresholds: &'a [crate::slo::Criterion],
    abort_on_fail: bool,
    #[serde(rename = "buckets_ms", serialize_with = "millis_list")]
    buckets: &'a [Duration],
    shard: Option<Shard>,
}

impl Serialize for Plan {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Plan {
            request,
            load,
            stop,
            transport,
            reporting,
            watch,
            shard,
            // Not part of the plan's identity: kept apart or not recorded.
            whole_hash: _,
            start_at: _,
            asked: _,
        } = self;
        Recorded {
            targets: &request.targets,
            connections: load.connections,
            // The report's key: `0` for a rate the stages give.
            rate: match load.pace {
                Pace::Closed => None,
                Pace::Rate(rate) => Some(rate),
                Pace::Staged => Some(0.0),
            },
            stages: &load.stages,
            max_connections: load.max_connections,
            rampup: load.rampup,
            scenario: &request.scenario,
            threads: load.threads,
            requests: stop.requests,
            duration: stop.duration,
            warmup: stop.warmup,
            delay: stop.delay,
            method: &request.method,
            headers: &request.headers,
            body: &request.body,
            success: &request.success,
            timeout: transport.timeout,
            connect_timeout: transport.connect_timeout,
            connect_to: &transport.connect_to,
            keepalive: transport.keepalive,
            pipeline: transport.pipeline,
            tls: &transport.tls,
            http: transport.http,
            streams: transport.streams,
            coalesce: transport.coalesce,
            interval: reporting.interval,
            monitor_pid: watch.monitor_pid,
            spawn: &watch.spawn,
            thresholds: &reporting.thresholds,
            abort_on_fail: reporting.abort_on_fail,
            buckets: &reporting.buckets,
            shard: *shard,
        }
        .serialize(s)
    }
}

fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn opt_secs<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

fn criteria_text<S: Serializer>(criteria: &&[crate::slo::Criterion], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(criteria.iter().map(|c| c.text.as_str()))
}

fn scenario_file<S: Serializer>(
    scenario: &&Option<std::sync::Arc<crate::scenario::Scenario>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match scenario {
        Some(sc) => s.serialize_some(&serde_json::json!({
            "file": sc.file.display().to_string(),
            "steps": sc.stat_names,
        })),
        None => s.serialize_none(),
    }
}

fn millis_list<S: Serializer>(list: &&[Duration], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|d| d.as_secs_f64() * 1000.0))
}

fn body_text<S: Serializer>(body: &&[u8], s: S) -> Result<S::Ok, S::Error> {
    match std::str::from_utf8(body) {
        Ok(text) => s.serialize_str(text),
        Err(_) => s.serialize_str(&format!("<{} bytes of binary data>", body.len())),
    }
}
