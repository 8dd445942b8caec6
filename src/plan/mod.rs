//! The resolved, validated plan of a run: what every report embeds.
//!
//! A plan is made in two steps. Raw flags (see `cli`) are checked into a
//! typed [`RunSpec`] (`spec`): durations, stages, headers and statuses
//! parsed, every rule between flags applied, nothing touched outside the
//! process. [`RunSpec::resolve`] (`resolve`) then does every side effect
//! once: DNS (or `--connect-to`), reading `--body-file` and the TLS files,
//! checking the `--monitor-pid` process. A plan file's settings are merged
//! into the spec as typed values (`file`).
//!
//! The [`Plan`]'s fields are grouped by concern: [`Load`] (how much, and its
//! shape), [`Stop`] (how long), [`Request`] (what is sent), [`Transport`]
//! (how it travels), [`Reporting`] (what is measured and judged), [`Watch`]
//! (the target's process), then the shard it is. Other plans are derived
//! from one by value: `--shard` splits it (`shard`), `volley step` gives
//! each level its own load with [`Plan::with_load`]; never through flag
//! text. In a report the plan is one flat object, its keys in the order
//! they have always had (`record`).

mod file;
mod parse;
mod record;
mod resolve;
pub mod shard;
pub mod spec;

pub use file::{LoadedFile, load_file};
pub use parse::{StatusSet, Warmup, parse_duration, parse_header, parse_warmup};
pub use spec::{BodySource, LoadAsk, RunSpec};

use crate::cli::RunArgs;
use crate::shape::{LoadModel, LoadProfile, Stage};
use crate::target::{Target, TargetError};
use serde::Serialize;
use std::time::Duration;
use thiserror::Error;

/// A usage problem: reported in one line, exit code 2.
#[derive(Debug, Error)]
pub enum PlanError {
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    ConnectTo(#[from] crate::target::ConnectToError),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error("--monitor-pid")]
    MonitorPid(#[source] crate::monitor::MonitorError),
    /// A plan file that cannot be read or checked (its place is in the
    /// message).
    #[error(transparent)]
    Scenario(crate::scenario::defs::FileError),
    /// Flags that do not go together, or one that a plan file or the
    /// command sets itself: the message says which, and what to do.
    #[error("{0}")]
    Conflict(&'static str),
    /// A number or a duration outside what its flag takes.
    #[error("{0}")]
    OutOfRange(&'static str),
    #[error("no URL given: volley run http://127.0.0.1:3000/")]
    NoUrl,
    #[error("{}: set 'base' (a plan runs against one origin)", .0.display())]
    NoBase(std::path::PathBuf),
    #[error("--max-connections {max} is below --connections {connections}")]
    MaxConnectionsBelow { max: usize, connections: usize },
    #[error("{flag} goes with https:// URLs")]
    HttpsOnly { flag: &'static str },
    #[error("invalid {flag} '{text}': {error} (examples: 10s, 2m, 500ms)")]
    Duration {
        flag: String,
        text: String,
        error: humantime::DurationError,
    },
    #[error("invalid --warmup '{0}'")]
    Warmup(String),
    #[error("invalid --status '{0}': use codes like 200,304 or classes like 2xx")]
    Status(String),
    #[error("--status names no status code")]
    NoStatus,
    #[error("invalid --method '{0}'")]
    Method(String),
    #[error("invalid header '{0}': use 'Name: value' or name=value")]
    Header(String),
    #[error("invalid header name in '{0}'")]
    HeaderName(String),
    #[error("header value in '{0}' contains a line break")]
    HeaderLineBreak(String),
    /// A `-H` framing header that could contradict the body.
    #[error("-H {0}")]
    Framing(crate::request::FramingError),
    /// A body file that cannot be read; `flag` names it as given
    /// (`--body-file 'PATH'`, `-b @PATH`).
    #[error("cannot read {flag}: {error}")]
    BodyFile { flag: String, error: std::io::Error },
    #[error("{0}")]
    Stages(crate::shape::StagesError),
    /// A criterion of `--threshold` or `--slo` that does not parse.
    #[error("{flag}: {message}")]
    Criterion { flag: &'static str, message: String },
    #[error("invalid --shard '{0}': use I/N with 0 <= I < N, e.g. 0/3")]
    Shard(String),
    #[error(
        "--shard {index}/{count}: {total} {what} cannot be split {count} ways; use at most {total} shards"
    )]
    ShardTooFine {
        index: u32,
        count: u32,
        what: &'static str,
        total: u64,
    },
    #[error("shard {index}/{count} of a plan cannot take another load: derive it from the whole plan")]
    ShardOfShard { index: u32, count: u32 },
    #[error("invalid --start-at '{text}': {error} (examples: +30s, 2026-11-23T14:00:00Z)")]
    StartAtOffset {
        text: String,
        error: humantime::DurationError,
    },
    #[error("invalid --start-at '{text}': {error} (use RFC 3339 in UTC, e.g. 2026-11-23T14:00:00Z, or +30s)")]
    StartAtTime {
        text: String,
        error: humantime::TimestampError,
    },
}

/// Which HTTP the run speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HttpVersion {
    /// HTTP/1.1 on http URLs; on https whatever ALPN settles.
    Auto,
    Http1,
    Http2,
    Http3,
}

/// Closed or open load, and where an open run's rate comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// Each connection sends as soon as its previous response is back.
    Closed,
    /// Requests are due at this many per second in all.
    Rate(f64),
    /// Requests are due at the rate the stages give, per second.
    Staged,
}

impl Pace {
    /// Whether requests have intended send times (the open model).
    pub fn is_open(self) -> bool {
        !matches!(self, Pace::Closed)
    }

    /// The fixed rate, where the open model has one.
    pub fn rate(self) -> Option<f64> {
        match self {
            Pace::Rate(rate) => Some(rate),
            Pace::Closed | Pace::Staged => None,
        }
    }
}

/// How much load, and its shape: what a step level and a shard change.
#[derive(Clone, Debug)]
pub struct Load {
    /// Connections (at the peak of a closed-model ramp).
    pub connections: usize,
    /// Closed or open, and the open model's rate.
    pub pace: Pace,
    /// A ramp of connections or (open) of requests per second.
    pub stages: Option<Vec<Stage>>,
    /// Open model: the pool may grow to this many connections.
    pub max_connections: Option<usize>,
    /// A plan file's rampup: connections join over this long.
    pub rampup: Option<Duration>,
    /// Worker threads; never more than connections.
    pub threads: usize,
}

impl Load {
    /// The load model the workers run: closed, with a ramp of connections
    /// where the stages or a plan file's rampup give one; or open, on the
    /// schedule of the rate or of the stages.
    pub fn model(&self) -> LoadModel {
        match (self.pace, &self.stages) {
            (Pace::Closed, Some(stages)) => LoadModel::Closed {
                ramp: Some(LoadProfile::ramp(stages.clone())),
            },
            // A plan file's rampup: connections join over it, then stay.
            (Pace::Closed, None) => LoadModel::Closed {
                ramp: self
                    .rampup
                    .map(|rampup| LoadProfile::ramp_then_hold(rampup, self.connections as f64)),
            },
            (Pace::Rate(rate), None) => LoadModel::Open {
                schedule: LoadProfile::constant(rate),
            },
            (Pace::Rate(_) | Pace::Staged, Some(stages)) => LoadModel::Open {
                schedule: LoadProfile::ramp(stages.clone()),
            },
            // Settling refuses `-R` alone without stages; with none, no
            // request is due.
            (Pace::Staged, None) => LoadModel::Open {
                schedule: LoadProfile::constant(0.0),
            },
        }
    }
}

/// How long each URL is loaded, what comes before, and the pause between.
#[derive(Clone, Debug)]
pub struct Stop {
    /// Stop after exactly this many measured requests.
    pub requests: Option<u64>,
    /// Stop after this long; `None` only when `requests` is set.
    pub duration: Option<Duration>,
    pub warmup: Option<Warmup>,
    /// Quiet between two URLs.
    pub delay: Duration,
}

/// What is sent. `Body` is the bytes in a plan, and where they come from
/// ([`BodySource`]) in a spec, before the file is read.
#[derive(Clone, Debug)]
pub struct Request<Body = bytes::Bytes> {
    /// The URLs, run one after another (resolved in a plan).
    pub targets: Vec<Target>,
    pub method: String,
    pub headers: Vec<(String, String)>,
    /// The request body (shown in reports when it is text).
    pub body: Body,
    /// The statuses that count as success.
    pub success: StatusSet,
    /// `volley plan`: the loaded plan file (its steps are in the report).
    pub scenario: Option<std::sync::Arc<crate::scenario::Scenario>>,
    /// `volley run -s`: the wrk script, loaded (its states set up and
    /// initialised for the run's threads).
    pub script: Option<std::sync::Arc<crate::script::Script>>,
    /// `volley script`: the virtual users' script, loaded (its init and
    /// `setup()` run).
    pub users: Option<std::sync::Arc<crate::vu::Users>>,
}

impl<Body> Request<Body> {
    /// The names of the statistics kept besides the totals: a plan file's
    /// steps, or the request names a VU script has met so far.
    pub fn step_names(&self) -> Vec<String> {
        match (&self.scenario, &self.users) {
            (Some(scenario), _) => scenario.stat_names.clone(),
            (None, Some(users)) => users.requests.list(),
            (None, None) => Vec::new(),
        }
    }
}

/// How requests travel. `Tls` is the read TLS files in a plan, the flags
/// naming them ([`crate::tls::TlsFlags`]) in a spec.
#[derive(Clone, Debug)]
pub struct Transport<Tls = crate::tls::TlsOptions> {
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// `--connect-to` as given (the targets' addresses are its).
    pub connect_to: Option<String>,
    pub keepalive: bool,
    /// Requests written at once per connection (1: no pipelining).
    pub pipeline: u32,
    /// `--insecure`, `--cacert`...
    pub tls: Tls,
    /// The HTTP version asked for.
    pub http: HttpVersion,
    /// HTTP/2 streams in flight per connection.
    pub streams: usize,
    /// `--coalesce`: a connection's streams send their requests in rounds
    /// (HTTP/2 and HTTP/3).
    pub coalesce: bool,
    /// io_uring or epoll, settled on this machine (not recorded: like the
    /// thread count, it belongs to the machine, not to the plan).
    pub io: crate::net::Io,
}

/// What is measured and how the run is judged.
#[derive(Clone, Debug)]
pub struct Reporting {
    /// The sampling interval of the time series.
    pub interval: Duration,
    /// Pass/fail criteria on the finished run (`--threshold`).
    pub thresholds: Vec<crate::slo::Criterion>,
    /// Stop once the totals so far break a threshold.
    pub abort_on_fail: bool,
    /// Response-time distribution thresholds (Gatling's 800 ms / 1200 ms).
    pub buckets: Vec<Duration>,
}

/// The target's process, watched during the run.
#[derive(Clone, Debug)]
pub struct Watch {
    /// The process watched (set by `--spawn` once started).
    pub monitor_pid: Option<u32>,
    /// A shell command that starts the target.
    pub spawn: Option<String>,
}

/// Everything a run needs, resolved and validated.
#[derive(Clone, Debug)]
pub struct Plan {
    pub request: Request,
    pub load: Load,
    pub stop: Stop,
    pub transport: Transport,
    pub reporting: Reporting,
    pub watch: Watch,
    /// `--shard I/N`: this run is slice I of N of the whole plan.
    pub shard: Option<shard::Shard>,
    /// The whole plan's hash, kept from before the split (see `shard`).
    pub whole_hash: Option<String>,
    /// `--start-at`: when the measured run starts (not part of the plan's
    /// identity: the report records it apart).
    pub start_at: Option<shard::StartAt>,
    /// The load and length as asked, before defaults: what
    /// [`Plan::with_load`] derives another load from.
    pub asked: LoadAsk,
}

/// Threads the process may run on (respects CPU affinity and cgroups).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Plan {
    /// Resolves raw flags into a plan, this shard's slice of it with
    /// `--shard`; every error is one line.
    pub fn from_args(args: &RunArgs) -> Result<Plan, PlanError> {
        RunSpec::from_args(args)?.resolve()
    }

    /// This plan with another load and length, by value: what `volley
    /// step` runs at each level. `asked` replaces the plan's own (a plan
    /// file's settings fill what it leaves open, as they did for the plan);
    /// the defaults and rules are the flags' ([`LoadAsk::settle`]), with the
    /// same messages. Nothing is resolved or read again. Derive from a
    /// whole plan: a `--shard` slice would be split again by nobody.
    pub fn with_load(mut self, asked: LoadAsk) -> Result<Plan, PlanError> {
        if let Some(shard) = self.shard {
            return Err(PlanError::ShardOfShard {
                index: shard.index,
                count: shard.count,
            });
        }
        let asked = match &self.request.scenario {
            Some(scenario) => asked.with_file_settings(&scenario.settings),
            None => asked,
        };
        let (load, stop) = asked.settle(self.transport.pipeline, self.transport.coalesce, self.stop.delay)?;
        self.load = load;
        self.stop = stop;
        self.asked = asked;
        Ok(self)
    }

    /// How many connections worker `index` owns: spread evenly, the
    /// remainder one each to the first workers, none dropped.
    pub fn connections_of(&self, index: usize) -> usize {
        share(self.load.connections as u64, self.load.threads, index) as usize
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
    fn a_load_is_derived_from_the_whole_plan_not_a_shard() {
        use clap::Parser;
        let plan = |extra: &[&str]| {
            let mut all = vec!["volley", "run", "http://127.0.0.1:1/", "-c", "4", "-t", "2"];
            all.extend(extra);
            match crate::cli::Cli::try_parse_from(all).unwrap().command {
                crate::cli::Command::Run(args) => Plan::from_args(&args).unwrap(),
                _ => unreachable!(),
            }
        };
        let rate = LoadAsk {
            rate: Some(Pace::Rate(500.0)),
            connections: Some(8),
            duration: Some(Duration::from_secs(3)),
            ..plan(&[]).asked
        };
        let derived = plan(&[]).with_load(rate.clone()).unwrap();
        assert_eq!(
            (
                derived.load.connections,
                derived.load.pace.rate(),
                derived.load.threads
            ),
            (8, Some(500.0), 2)
        );
        assert_eq!(derived.stop.duration, Some(Duration::from_secs(3)));
        let err = plan(&["--shard", "0/2"]).with_load(rate).unwrap_err().to_string();
        assert!(err.contains("derive it from the whole plan"), "{err}");
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
