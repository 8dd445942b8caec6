//! The resolved, validated plan of a run: what every report embeds.
//!
//! Raw CLI flags (see `cli`) hold no logic; [`Plan::from_args`] turns them
//! into this fully resolved value or a one-line usage error.

pub mod shard;

use crate::cli::RunArgs;
use crate::shape::{Stage, parse_stages};
use crate::target::{Target, TargetError};
use serde::{Serialize, Serializer};
use std::time::Duration;
use thiserror::Error;

/// A usage problem: reported in one line, exit code 2.
#[derive(Debug, Error)]
pub enum PlanError {
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("{0}")]
    Invalid(String),
}

fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::Invalid(msg.into())
}

/// Warm-up before measuring: a span of time or a number of requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Warmup {
    Duration(Duration),
    Requests(u64),
}

impl Serialize for Warmup {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(1))?;
        match self {
            Warmup::Duration(d) => map.serialize_entry("duration_s", &d.as_secs_f64())?,
            Warmup::Requests(n) => map.serialize_entry("requests", n)?,
        }
        map.end()
    }
}

/// The set of statuses that count as success, as a bitset over 0..640.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusSet {
    bits: [u64; 10],
    /// How the user wrote it (or the default), for reports.
    spec: String,
}

impl StatusSet {
    /// Any 2xx or 3xx: what a browser would not call a failure.
    pub fn default_success() -> StatusSet {
        let mut set = StatusSet {
            bits: [0; 10],
            spec: "2xx,3xx".to_string(),
        };
        (200..400).for_each(|code| set.insert(code));
        set
    }

    /// Parses `200,304` or ranges such as `2xx` and `200-299`.
    pub fn parse(spec: &str) -> Result<StatusSet, PlanError> {
        let mut set = StatusSet {
            bits: [0; 10],
            spec: spec.to_string(),
        };
        let bad = |part: &str| {
            invalid(format!(
                "invalid --status '{part}': use codes like 200,304 or classes like 2xx"
            ))
        };
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (lo, hi) = if let Some(class) = part.strip_suffix("xx").or_else(|| part.strip_suffix("XX")) {
                let digit: u16 = class.parse().map_err(|_| bad(part))?;
                (digit * 100, digit * 100 + 99)
            } else if let Some((a, b)) = part.split_once('-') {
                (
                    a.trim().parse().map_err(|_| bad(part))?,
                    b.trim().parse().map_err(|_| bad(part))?,
                )
            } else {
                let code = part.parse().map_err(|_| bad(part))?;
                (code, code)
            };
            if !(100..=599).contains(&lo) || !(100..=599).contains(&hi) || lo > hi {
                return Err(bad(part));
            }
            (lo..=hi).for_each(|code| set.insert(code));
        }
        if set.bits.iter().all(|b| *b == 0) {
            return Err(invalid("--status names no status code"));
        }
        Ok(set)
    }

    fn insert(&mut self, code: u16) {
        self.bits[usize::from(code / 64)] |= 1 << (code % 64);
    }

    /// Whether a response with this status is a success.
    #[inline]
    pub fn contains(&self, code: u16) -> bool {
        let word = usize::from(code / 64);
        word < self.bits.len() && self.bits[word] & (1 << (code % 64)) != 0
    }
}

impl Serialize for StatusSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.spec)
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

fn criteria_text<S: Serializer>(criteria: &[crate::slo::Criterion], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(criteria.iter().map(|c| c.text.as_str()))
}

fn scenario_file<S: Serializer>(
    scenario: &Option<std::sync::Arc<crate::scenario::Scenario>>,
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

fn millis_list<S: Serializer>(list: &[Duration], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|d| d.as_secs_f64() * 1000.0))
}

/// Everything a run needs, resolved and validated.
/// Which HTTP the run speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HttpVersion {
    /// HTTP/1.1 on http URLs; on https whatever ALPN settles.
    Auto,
    Http1,
    Http2,
}

#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The URLs, run one after another.
    pub targets: Vec<Target>,
    /// Connections (at the peak of a closed-model ramp).
    pub connections: usize,
    /// Open model: requests per second in all (`None`: closed model).
    pub rate: Option<f64>,
    /// A ramp of connections or (with `rate`) of requests per second.
    pub stages: Option<Vec<Stage>>,
    /// Open model: the pool may grow to this many connections.
    pub max_connections: Option<usize>,
    /// A plan file's rampup: connections join over this long.
    #[serde(rename = "rampup_s", serialize_with = "opt_secs")]
    pub rampup: Option<Duration>,
    /// `volley plan`: the loaded plan file (its steps are in the report).
    #[serde(serialize_with = "scenario_file")]
    pub scenario: Option<std::sync::Arc<crate::scenario::Scenario>>,
    /// Worker threads; never more than connections.
    pub threads: usize,
    /// Stop after exactly this many measured requests.
    pub requests: Option<u64>,
    /// Stop after this long; `None` only when `requests` is set.
    #[serde(rename = "duration_s", serialize_with = "opt_secs")]
    pub duration: Option<Duration>,
    pub warmup: Option<Warmup>,
    /// Quiet between two URLs.
    #[serde(rename = "delay_s", serialize_with = "secs")]
    pub delay: Duration,
    pub method: String,
    pub headers: Vec<(String, String)>,
    /// The request body (shown in reports when it is text).
    #[serde(serialize_with = "body_text")]
    pub body: Vec<u8>,
    #[serde(rename = "expected_status")]
    pub success: StatusSet,
    #[serde(rename = "timeout_s", serialize_with = "secs")]
    pub timeout: Duration,
    #[serde(rename = "connect_timeout_s", serialize_with = "secs")]
    pub connect_timeout: Duration,
    /// `--connect-to` as given (the targets' addresses are its).
    pub connect_to: Option<String>,
    pub keepalive: bool,
    /// Requests written at once per connection (1: no pipelining).
    pub pipeline: u32,
    /// `--insecure`, `--cacert`...: in the report as top-level plan keys.
    #[serde(flatten)]
    pub tls: crate::tls::TlsOptions,
    /// The HTTP version asked for.
    pub http: HttpVersion,
    /// HTTP/2 streams in flight per connection.
    pub streams: usize,
    /// The sampling interval of the time series.
    #[serde(rename = "interval_s", serialize_with = "secs")]
    pub interval: Duration,
    /// The process watched during the run (set by `--spawn` once started).
    pub monitor_pid: Option<u32>,
    /// A shell command that starts the target.
    pub spawn: Option<String>,
    /// Pass/fail criteria on the finished run (`--threshold`).
    #[serde(serialize_with = "criteria_text")]
    pub thresholds: Vec<crate::slo::Criterion>,
    /// Stop once the totals so far break a threshold.
    pub abort_on_fail: bool,
    /// Response-time distribution thresholds (Gatling's 800 ms / 1200 ms).
    #[serde(rename = "buckets_ms", serialize_with = "millis_list")]
    pub buckets: Vec<Duration>,
    /// `--shard I/N`: this run is slice I of N of the whole plan.
    pub shard: Option<shard::Shard>,
    /// The whole plan's hash, kept from before the split (see `shard`).
    #[serde(skip)]
    pub whole_hash: Option<String>,
    /// `--start-at`: when the measured run starts (not part of the plan's
    /// identity: the report records it apart).
    #[serde(skip)]
    pub start_at: Option<shard::StartAt>,
}

fn body_text<S: Serializer>(body: &[u8], s: S) -> Result<S::Ok, S::Error> {
    match std::str::from_utf8(body) {
        Ok(text) => s.serialize_str(text),
        Err(_) => s.serialize_str(&format!("<{} bytes of binary data>", body.len())),
    }
}

/// Parses a humantime duration (`10s`, `2m`, `500ms`), naming the flag on error.
pub fn parse_duration(flag: &str, text: &str) -> Result<Duration, PlanError> {
    humantime::parse_duration(text.trim())
        .map_err(|e| invalid(format!("invalid {flag} '{text}': {e} (examples: 10s, 2m, 500ms)")))
}

/// Parses `-w`: a bare number is a request count, anything else a duration.
pub fn parse_warmup(text: &str) -> Result<Warmup, PlanError> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let n: u64 = text
            .parse()
            .map_err(|_| invalid(format!("invalid --warmup '{text}'")))?;
        return Ok(Warmup::Requests(n));
    }
    parse_duration("--warmup", text).map(Warmup::Duration)
}

/// Parses `-H`: curl's `Name: value`, or `name=value` as fun-bomb takes it.
pub fn parse_header(text: &str) -> Result<(String, String), PlanError> {
    let colon = text.find(':');
    let equals = text.find('=');
    let split = match (colon, equals) {
        (Some(c), Some(e)) => c.min(e),
        (Some(c), None) => c,
        (None, Some(e)) => e,
        (None, None) => {
            return Err(invalid(format!(
                "invalid header '{text}': use 'Name: value' or name=value"
            )));
        }
    };
    let name = text[..split].trim();
    let value = text[split + 1..].trim();
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(invalid(format!("invalid header name in '{text}'")));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n') {
        return Err(invalid(format!("header value in '{text}' contains a line break")));
    }
    Ok((name.to_string(), value.to_string()))
}

/// Threads the process may run on (respects CPU affinity and cgroups).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Plan {
    /// Resolves raw flags into a plan, this shard's slice of it with
    /// `--shard`; every error is one line.
    pub fn from_args(args: &RunArgs) -> Result<Plan, PlanError> {
        Plan::resolve(args)?.with_shard_flags(args)
    }

    /// Resolves raw flags into the whole plan.
    fn resolve(args: &RunArgs) -> Result<Plan, PlanError> {
        if args.urls.is_empty() {
            return Err(invalid("no URL given: volley run http://127.0.0.1:3000/"));
        }
        let connect_to = args
            .connect_to
            .as_deref()
            .map(crate::target::resolve_connect_to)
            .transpose()
            .map_err(invalid)?;
        let mut targets = Vec::with_capacity(args.urls.len());
        for url in &args.urls {
            let mut target = Target::parse(url)?;
            match &connect_to {
                Some(addrs) => target.addrs = addrs.clone(),
                None => target.resolve()?,
            }
            targets.push(target);
        }
        let stages = args
            .stages
            .as_deref()
            .map(parse_stages)
            .transpose()
            .map_err(PlanError::Invalid)?;
        let rate = match (args.rate, &stages) {
            (Some(r), _) if !r.is_finite() || r < 0.0 => {
                return Err(invalid("--rate must be a positive number"));
            }
            (Some(r), Some(_)) if r > 0.0 => {
                return Err(invalid(
                    "with --stages give -R without a number: the stages set the rate",
                ));
            }
            (Some(0.0), None) => {
                return Err(invalid("--rate needs requests per second, e.g. -R 1000"));
            }
            (rate, _) => rate,
        };
        let connections = match (&stages, rate, args.connections) {
            (Some(_), None, Some(_)) => {
                return Err(invalid(
                    "--stages sets the connections of a closed-model run: drop -c",
                ));
            }
            (Some(stages), None, None) => stages
                .iter()
                .map(|s| s.target)
                .fold(0.0, f64::max)
                .ceil()
                .max(1.0) as usize,
            (_, _, c) => c.unwrap_or(50),
        };
        if connections == 0 {
            return Err(invalid("--connections must be at least 1"));
        }
        if let Some(max) = args.max_connections {
            if rate.is_none() {
                return Err(invalid("--max-connections goes with --rate (the open model)"));
            }
            if max < connections {
                return Err(invalid(format!(
                    "--max-connections {max} is below --connections {connections}"
                )));
            }
        }
        if rate.is_some() && args.pipeline > 1 {
            return Err(invalid("--pipeline goes with the closed model, not --rate"));
        }
        if stages.is_some() && args.duration.is_some() {
            return Err(invalid("--stages sets the duration: drop -d"));
        }
        if stages.is_some() && args.warmup.is_some() {
            return Err(invalid(
                "--warmup does not go with --stages: begin with a warm-up stage instead",
            ));
        }
        let threads = args.threads.unwrap_or_else(available_cores);
        if threads == 0 {
            return Err(invalid("--threads must be at least 1"));
        }
        if args.requests == Some(0) {
            return Err(invalid("--requests must be at least 1"));
        }
        let stages_duration = stages
            .as_ref()
            .map(|st| st.iter().map(|s| s.duration).sum::<Duration>());
        let duration = match (&args.duration, args.requests) {
            _ if stages_duration.is_some() => stages_duration,
            (Some(d), _) => Some(parse_duration("--duration", d)?),
            (None, Some(_)) => None,
            (None, None) => Some(Duration::from_secs(10)),
        };
        if duration.is_some_and(|d| d.is_zero()) {
            return Err(invalid("--duration must be longer than 0s"));
        }
        let warmup = match &args.warmup {
            None => None,
            Some(text) => match parse_warmup(text)? {
                Warmup::Requests(0) => None,
                Warmup::Duration(d) if d.is_zero() => None,
                w => Some(w),
            },
        };
        let method = args.method.trim().to_ascii_uppercase();
        if method.is_empty()
            || !method
                .bytes()
                .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_')
        {
            return Err(invalid(format!("invalid --method '{}'", args.method)));
        }
        let headers = args
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let body = match (&args.body, &args.body_file) {
            (Some(text), None) => text.clone().into_bytes(),
            (None, Some(path)) => std::fs::read(path)
                .map_err(|e| invalid(format!("cannot read --body-file '{}': {e}", path.display())))?,
            (None, None) => Vec::new(),
            (Some(_), Some(_)) => return Err(invalid("give either --body or --body-file, not both")),
        };
        for (name, value) in &headers {
            crate::http1::request::check_framing(name, Some(value), Some(&body))
                .map_err(|e| invalid(format!("-H {e}")))?;
        }
        let success = match &args.status {
            Some(spec) => StatusSet::parse(spec)?,
            None => StatusSet::default_success(),
        };
        let timeout = parse_duration("--timeout", &args.timeout)?;
        let connect_timeout = parse_duration("--connect-timeout", &args.connect_timeout)?;
        let interval = parse_duration("--interval", &args.interval)?;
        if timeout.is_zero() || connect_timeout.is_zero() {
            return Err(invalid("timeouts must be longer than 0s"));
        }
        if interval < Duration::from_millis(10) {
            return Err(invalid("--interval must be at least 10ms"));
        }
        if args.pipeline == 0 || args.pipeline > 1024 {
            return Err(invalid("--pipeline must be between 1 and 1024"));
        }
        if args.streams == 0 || args.streams > 10_000 {
            return Err(invalid("--streams must be between 1 and 10000"));
        }
        if args.streams > 1 && args.http1_1 {
            return Err(invalid("--streams needs HTTP/2: drop --http1.1"));
        }
        if args.streams > 1 && !args.http2 && targets.iter().any(|t| !t.tls) {
            return Err(invalid("--streams needs HTTP/2: add --http2 (h2c on http URLs)"));
        }
        if args.pipeline > 1 && args.http2 {
            return Err(invalid(
                "--pipeline is HTTP/1.1's; HTTP/2 multiplexes with --streams",
            ));
        }
        if args.pipeline > 1 && args.no_keepalive {
            return Err(invalid(
                "--pipeline needs keep-alive connections: drop --no-keepalive",
            ));
        }
        let tls = crate::tls::TlsOptions::from_args(args).map_err(invalid)?;
        if let Some(flag) = tls.https_only_flag()
            && !targets.iter().any(|t| t.tls)
        {
            return Err(invalid(format!("{flag} goes with https:// URLs")));
        }
        let mut buckets = args
            .buckets
            .split(',')
            .filter(|b| !b.trim().is_empty())
            .map(|b| parse_duration("--buckets", b))
            .collect::<Result<Vec<_>, _>>()?;
        buckets.sort();
        buckets.dedup();
        Ok(Plan {
            targets,
            connections,
            rate,
            stages,
            max_connections: args.max_connections,
            rampup: None,
            scenario: None,
            thresholds: args
                .thresholds
                .iter()
                .map(|t| crate::slo::parse_criterion(t).map_err(|e| invalid(format!("--threshold: {e}"))))
                .collect::<Result<_, _>>()?,
            abort_on_fail: args.abort_on_fail,
            monitor_pid: match args.monitor_pid {
                Some(pid) => {
                    crate::monitor::ProcSampler::new(pid)
                        .map_err(|e| invalid(format!("--monitor-pid: {e}")))?;
                    Some(pid)
                }
                None => None,
            },
            spawn: args.spawn.clone(),
            threads: threads.min(connections),
            requests: args.requests,
            duration,
            warmup,
            delay: parse_duration("--delay", &args.delay)?,
            method,
            headers,
            body,
            success,
            timeout,
            connect_timeout,
            connect_to: args.connect_to.clone(),
            keepalive: !args.no_keepalive,
            pipeline: args.pipeline,
            tls,
            http: if args.http2 {
                HttpVersion::Http2
            } else if args.http1_1 {
                HttpVersion::Http1
            } else {
                HttpVersion::Auto
            },
            streams: args.streams,
            interval,
            buckets,
            shard: None,
            whole_hash: None,
            start_at: None,
        })
    }

    /// How many connections worker `index` owns: spread evenly, the
    /// remainder one each to the first workers, none dropped.
    pub fn connections_of(&self, index: usize) -> usize {
        share(self.connections as u64, self.threads, index) as usize
    }
}

impl Plan {
    /// Resolves `volley plan`: the file's settings, overridden by flags.
    pub fn from_plan_args(args: &crate::cli::PlanArgs) -> Result<Plan, PlanError> {
        use crate::scenario::{self, StepKind, TagFilter};
        let filter = TagFilter {
            tags: args.tags.clone(),
            skip_tags: args.skip_tags.clone(),
        };
        let scenario =
            scenario::load(&args.file, &filter, args.base.as_deref()).map_err(|e| invalid(e.to_string()))?;
        for warning in &scenario.warnings {
            eprintln!("warning: {warning}");
        }
        let run = &args.run;
        if !run.urls.is_empty() {
            return Err(invalid("volley plan takes its URLs from the plan file ('base')"));
        }
        if run.method != "GET" || !run.headers.is_empty() || run.body.is_some() || run.body_file.is_some() {
            return Err(invalid(
                "the plan file sets the requests: drop -m, -H, -b and --body-file",
            ));
        }
        if run.pipeline > 1 {
            return Err(invalid(
                "--pipeline does not go with a plan (its requests depend on each other)",
            ));
        }
        let settings = &scenario.settings;
        let origin = match &settings.base {
            Some(base) => base.clone(),
            // No base: take the origin of the first absolute URL.
            None => scenario
                .steps
                .iter()
                .find_map(|s| match &s.kind {
                    StepKind::Request(r) => r.url.as_static().map(str::to_string),
                    _ => None,
                })
                .and_then(|u| url::Url::parse(&u).ok())
                .map(|u| u.origin().ascii_serialization())
                .ok_or_else(|| {
                    invalid(format!(
                        "{}: set 'base' (a plan runs against one origin)",
                        args.file.display()
                    ))
                })?,
        };
        let mut resolved = run.clone();
        resolved.urls = vec![origin];
        if resolved.connections.is_none() && (resolved.stages.is_none() || resolved.rate.is_some()) {
            resolved.connections = settings.concurrency;
        }
        if resolved.requests.is_none() && resolved.duration.is_none() && resolved.stages.is_none() {
            resolved.requests = settings.iterations;
            resolved.duration = settings
                .run_time
                .map(|d| humantime::format_duration(d).to_string());
            if resolved.requests.is_none() && resolved.duration.is_none() {
                resolved.requests = Some(1);
            }
        }
        if resolved.status.is_none()
            && let Some(codes) = &settings.success_codes
        {
            resolved.status = Some(codes.iter().map(u16::to_string).collect::<Vec<_>>().join(","));
        }
        let mut plan = Plan::resolve(&resolved)?;
        if resolved.stages.is_none() && resolved.rate.is_none() {
            plan.rampup = settings.rampup.filter(|r| !r.is_zero());
        }
        plan.scenario = Some(std::sync::Arc::new(scenario));
        plan.with_shard_flags(&resolved)
    }
}

/// Splits `total` over `parts` as evenly as possible; the first
/// `total % parts` parts get one more.
pub fn share(total: u64, parts: usize, index: usize) -> u64 {
    let parts = parts as u64;
    let index = index as u64;
    total / parts + u64::from(index < total % parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_sets() {
        let default = StatusSet::default_success();
        assert!(
            default.contains(200)
                && default.contains(399)
                && !default.contains(404)
                && !default.contains(199)
        );
        let set = StatusSet::parse("200,304,5xx").unwrap();
        assert!(set.contains(200) && set.contains(304) && set.contains(503) && !set.contains(201));
        assert!(StatusSet::parse("200-204").unwrap().contains(204));
        assert!(StatusSet::parse("abc").is_err());
        assert!(StatusSet::parse("700").is_err());
        assert!(!set.contains(700));
    }

    #[test]
    fn headers_both_styles() {
        assert_eq!(
            parse_header("Accept: a=b").unwrap(),
            ("Accept".into(), "a=b".into())
        );
        assert_eq!(parse_header("x-key=v:1").unwrap(), ("x-key".into(), "v:1".into()));
        assert!(parse_header("novalue").is_err());
        assert!(parse_header("bad name: x").is_err());
    }

    #[test]
    fn warmup_count_or_duration() {
        assert_eq!(parse_warmup("500").unwrap(), Warmup::Requests(500));
        assert_eq!(
            parse_warmup("2s").unwrap(),
            Warmup::Duration(Duration::from_secs(2))
        );
        assert!(parse_warmup("2 parsecs").is_err());
    }

    #[test]
    fn shares_add_up() {
        for (total, parts) in [(50u64, 3usize), (7, 7), (1, 2), (10_000, 2), (3, 8)] {
            let sum: u64 = (0..parts).map(|i| share(total, parts, i)).sum();
            assert_eq!(sum, total);
            let max = (0..parts).map(|i| share(total, parts, i)).max().unwrap();
            let min = (0..parts).map(|i| share(total, parts, i)).min().unwrap();
            assert!(max - min <= 1);
        }
    }
}
