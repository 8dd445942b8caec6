//! A run's flags checked into a typed value, without side effects.
//!
//! [`RunSpec::from_args`] parses every flag (durations, stages, headers,
//! statuses, TLS flags) and applies every rule between them, so a usage
//! error is found before anything outside the process is touched: no DNS,
//! no file read, no /proc. [`LoadAsk`] is the load and length as asked,
//! before defaults; [`LoadAsk::settle`] applies the defaults and the rules
//! between them, for the flags and for every load derived later (a step
//! level, see [`super::Plan::with_load`]).

use super::{
    HttpVersion, Load, Pace, PlanError, Reporting, Request, StatusSet, Stop, Transport, Warmup, Watch,
    available_cores, parse_duration, parse_header, parse_warmup, shard,
};
use crate::cli::RunArgs;
use crate::shape::{Stage, parse_stages};
use crate::target::Target;
use crate::tls::TlsFlags;
use std::path::PathBuf;
use std::time::Duration;

/// Where the request body comes from: read in the resolve step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodySource {
    /// `--body`, or none (empty).
    Inline(Vec<u8>),
    /// `--body-file`.
    File(PathBuf),
    /// `-b @FILE`, which reads the file as curl's `-d @FILE` does.
    At(PathBuf),
}

/// The load and length as asked (flags, a plan file's settings, a step
/// level), before defaults and the rules between them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadAsk {
    /// `-c`.
    pub connections: Option<usize>,
    /// `-R`: a rate, or (`-R` without a number, with `stages`) the
    /// stages in requests per second.
    pub rate: Option<Pace>,
    pub stages: Option<Vec<Stage>>,
    pub max_connections: Option<usize>,
    /// `-t` (default: the cores this process may use).
    pub threads: Option<usize>,
    /// `-n`.
    pub requests: Option<u64>,
    /// `-d`.
    pub duration: Option<Duration>,
    /// `-w`.
    pub warmup: Option<Warmup>,
    /// A plan file's rampup (for a closed model without stages).
    pub rampup: Option<Duration>,
}

impl LoadAsk {
    /// Parses the load and length flags.
    pub fn from_args(args: &RunArgs) -> Result<LoadAsk, PlanError> {
        Ok(LoadAsk {
            connections: args.connections,
            rate: args.rate.map(|rate| rate.map_or(Pace::Staged, Pace::Rate)),
            stages: args
                .stages
                .as_deref()
                .map(parse_stages)
                .transpose()
                .map_err(PlanError::Stages)?,
            max_connections: args.max_connections,
            threads: args.threads,
            requests: args.requests,
            duration: args
                .duration
                .as_deref()
                .map(|d| parse_duration("--duration", d))
                .transpose()?,
            warmup: args.warmup.as_deref().map(parse_warmup).transpose()?,
            rampup: None,
        })
    }

    /// The load and the length this asks for: defaults applied, the rules
    /// between them checked (`pipeline` is the run's `--pipeline`,
    /// `coalesce` its `--coalesce`, `delay` its pause between URLs). Every
    /// error is one line naming the flags.
    pub fn settle(&self, pipeline: u32, coalesce: bool, delay: Duration) -> Result<(Load, Stop), PlanError> {
        let stages = &self.stages;
        let pace = match (self.rate, stages) {
            (Some(Pace::Rate(r)), _) if !r.is_finite() || r < 0.0 => {
                return Err(PlanError::OutOfRange("--rate must be a positive number"));
            }
            (Some(Pace::Rate(r)), Some(_)) if r > 0.0 => {
                return Err(PlanError::Conflict(
                    "with --stages give -R without a number: the stages set the rate",
                ));
            }
            // `-R 0` reads as `-R` alone.
            (Some(Pace::Staged | Pace::Rate(_)), Some(_)) => Pace::Staged,
            (Some(Pace::Staged), None) | (Some(Pace::Rate(0.0)), None) => {
                return Err(PlanError::OutOfRange(
                    "--rate needs requests per second, e.g. -R 1000",
                ));
            }
            (Some(pace), None) => pace,
            (Some(Pace::Closed) | None, _) => Pace::Closed,
        };
        let connections = match (stages, pace.is_open(), self.connections) {
            (Some(_), false, Some(_)) => {
                return Err(PlanError::Conflict(
                    "--stages sets the connections of a closed-model run: drop -c",
                ));
            }
            (Some(stages), false, None) => stages
                .iter()
                .map(|s| s.target)
                .fold(0.0, f64::max)
                .ceil()
                .max(1.0) as usize,
            (_, _, c) => c.unwrap_or(50),
        };
        if connections == 0 {
            return Err(PlanError::OutOfRange("--connections must be at least 1"));
        }
        if let Some(max) = self.max_connections {
            if !pace.is_open() {
                return Err(PlanError::Conflict(
                    "--max-connections goes with --rate (the open model)",
                ));
            }
            if max < connections {
                return Err(PlanError::MaxConnectionsBelow { max, connections });
            }
        }
        if pace.is_open() && pipeline > 1 {
            return Err(PlanError::Conflict(
                "--pipeline goes with the closed model, not --rate",
            ));
        }
        if pace.is_open() && coalesce {
            return Err(PlanError::Conflict(
                "--coalesce goes with the closed model, not --rate: it holds requests back, and -R sends each at its time",
            ));
        }
        if stages.is_some() && self.duration.is_some() {
            return Err(PlanError::Conflict("--stages sets the duration: drop -d"));
        }
        if stages.is_some() && self.warmup.is_some() {
            return Err(PlanError::Conflict(
                "--warmup does not go with --stages: begin with a warm-up stage instead",
            ));
        }
        let threads = self.threads.unwrap_or_else(available_cores);
        if threads == 0 {
            return Err(PlanError::OutOfRange("--threads must be at least 1"));
        }
        if self.requests == Some(0) {
            return Err(PlanError::OutOfRange("--requests must be at least 1"));
        }
        let stages_duration = stages
            .as_ref()
            .map(|st| st.iter().map(|s| s.duration).sum::<Duration>());
        let duration = match (self.duration, self.requests) {
            _ if stages_duration.is_some() => stages_duration,
            (Some(d), _) => Some(d),
            (None, Some(_)) => None,
            (None, None) => Some(Duration::from_secs(10)),
        };
        if duration.is_some_and(|d| d.is_zero()) {
            return Err(PlanError::OutOfRange("--duration must be longer than 0s"));
        }
        let warmup = match self.warmup {
            Some(Warmup::Requests(0)) => None,
            Some(Warmup::Duration(d)) if d.is_zero() => None,
            w => w,
        };
        // A plan file's rampup shapes a closed model's steady pool only.
        let rampup = self
            .rampup
            .filter(|r| !r.is_zero() && stages.is_none() && !pace.is_open());
        let load = Load {
            connections,
            pace,
            stages: stages.clone(),
            max_connections: self.max_connections,
            rampup,
            threads: threads.min(connections),
        };
        let stop = Stop {
            requests: self.requests,
            duration,
            warmup,
            delay,
        };
        Ok((load, stop))
    }
}

/// A run's flags, typed and checked; [`RunSpec::resolve`] makes the plan.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// The load and length as asked, kept for deriving other loads.
    pub asked: LoadAsk,
    pub load: Load,
    pub stop: Stop,
    /// The targets are parsed, not yet resolved; the body not yet read.
    pub request: Request<BodySource>,
    /// The TLS files are named, not yet read.
    pub transport: Transport<TlsFlags>,
    pub reporting: Reporting,
    /// `monitor_pid` is not yet checked.
    pub watch: Watch,
    pub shard: Option<shard::Shard>,
    pub start_at: Option<shard::StartAt>,
}

/// Parses the URLs (without resolving them).
pub(super) fn parse_urls(urls: &[String]) -> Result<Vec<Target>, PlanError> {
    if urls.is_empty() {
        return Err(PlanError::Conflict(
            "no URL given: volley run http://127.0.0.1:3000/",
        ));
    }
    Ok(urls
        .iter()
        .map(|url| Target::parse_or_http(url))
        .collect::<Result<_, _>>()?)
}

impl RunSpec {
    /// Checks `volley run`'s flags.
    pub fn from_args(args: &RunArgs) -> Result<RunSpec, PlanError> {
        let targets = parse_urls(&args.urls)?;
        RunSpec::new(args, targets, LoadAsk::from_args(args)?)
    }

    /// Checks `volley run`'s flags with the load `asked` instead of theirs
    /// (`volley step`'s first level).
    pub fn from_args_with_load(args: &RunArgs, asked: LoadAsk) -> Result<RunSpec, PlanError> {
        RunSpec::new(args, parse_urls(&args.urls)?, asked)
    }

    /// Checks every flag but the URLs and the load, which the caller gives
    /// (the flags', a plan file's, a step level's).
    pub(super) fn new(args: &RunArgs, targets: Vec<Target>, asked: LoadAsk) -> Result<RunSpec, PlanError> {
        if let Some(text) = &args.connect_to {
            crate::target::parse_connect_to(text)?;
        }
        let delay = parse_duration("--delay", &args.delay)?;
        let (load, stop) = asked.settle(args.pipeline, args.coalesce, delay)?;
        let method = args.method.trim().to_ascii_uppercase();
        if method.is_empty()
            || !method
                .bytes()
                .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_')
        {
            return Err(PlanError::Method(args.method.clone()));
        }
        let headers = args
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let body = match (&args.body, &args.body_file) {
            (Some(text), None) => match text.strip_prefix('@') {
                Some(path) if !path.is_empty() => BodySource::At(PathBuf::from(path)),
                _ => BodySource::Inline(text.clone().into_bytes()),
            },
            (None, Some(path)) => BodySource::File(path.clone()),
            (None, None) => BodySource::Inline(Vec::new()),
            (Some(_), Some(_)) => {
                return Err(PlanError::Conflict("give either --body or --body-file, not both"));
            }
        };
        if let BodySource::Inline(body) = &body {
            check_headers_frame(&headers, body)?;
        }
        let success = match &args.status {
            Some(spec) => StatusSet::parse(spec)?,
            None => StatusSet::default_success(),
        };
        let timeout = parse_duration("--timeout", &args.timeout)?;
        let connect_timeout = parse_duration("--connect-timeout", &args.connect_timeout)?;
        let interval = parse_duration("--interval", &args.interval)?;
        if timeout.is_zero() || connect_timeout.is_zero() {
            return Err(PlanError::OutOfRange("timeouts must be longer than 0s"));
        }
        if interval < Duration::from_millis(10) {
            return Err(PlanError::OutOfRange("--interval must be at least 10ms"));
        }
        if args.pipeline == 0 || args.pipeline > 1024 {
            return Err(PlanError::OutOfRange("--pipeline must be between 1 and 1024"));
        }
        if args.streams == 0 || args.streams > 10_000 {
            return Err(PlanError::OutOfRange("--streams must be between 1 and 10000"));
        }
        if args.streams > 1 && args.http1_1 {
            return Err(PlanError::Conflict("--streams needs HTTP/2: drop --http1.1"));
        }
        if args.streams > 1 && !args.http2 && !args.http3 && targets.iter().any(|t| !t.tls) {
            return Err(PlanError::Conflict(
                "--streams needs HTTP/2: add --http2 (h2c on http URLs)",
            ));
        }
        if args.coalesce && args.http1_1 {
            return Err(PlanError::Conflict(
                "--coalesce is for HTTP/2 and HTTP/3: it joins the requests of a connection's streams",
            ));
        }
        if args.coalesce && args.streams < 2 {
            return Err(PlanError::Conflict(
                "--coalesce needs --streams 2 or more: it joins the requests of a connection's streams",
            ));
        }
        if args.pipeline > 1 && args.http2 {
            return Err(PlanError::Conflict(
                "--pipeline is HTTP/1.1's; HTTP/2 multiplexes with --streams",
            ));
        }
        if args.pipeline > 1 && args.http3 {
            return Err(PlanError::Conflict(
                "--pipeline is HTTP/1.1's; HTTP/3 multiplexes with --streams",
            ));
        }
        if args.zero_rtt && !args.http3 {
            return Err(PlanError::Conflict(
                "--0rtt needs --http3: volley sends early data over QUIC only",
            ));
        }
        if args.zero_rtt && args.no_tls_resume {
            return Err(PlanError::Conflict(
                "--0rtt needs session resumption: drop --no-tls-resume",
            ));
        }
        if args.http3 && targets.iter().any(|t| !t.tls) {
            return Err(PlanError::Conflict(
                "--http3 needs https:// URLs: HTTP/3 runs over QUIC, which is always encrypted",
            ));
        }
        if args.pipeline > 1 && args.no_keepalive {
            return Err(PlanError::Conflict(
                "--pipeline needs keep-alive connections: drop --no-keepalive",
            ));
        }
        let tls = TlsFlags::from_args(args)?;
        if let Some(flag) = tls.https_only_flag()
            && !targets.iter().any(|t| t.tls)
        {
            return Err(PlanError::HttpsOnly { flag });
        }
        let mut buckets = args
            .buckets
            .split(',')
            .filter(|b| !b.trim().is_empty())
            .map(|b| parse_duration("--buckets", b))
            .collect::<Result<Vec<_>, _>>()?;
        buckets.sort();
        buckets.dedup();
        let thresholds = args
            .thresholds
            .iter()
            .map(|t| {
                crate::slo::parse_criterion(t).map_err(|message| PlanError::Criterion {
                    flag: "--threshold",
                    message,
                })
            })
            .collect::<Result<_, _>>()?;
        let tolerance = parse_duration("--start-tolerance", &args.start_tolerance)?;
        let start_at = match &args.start_at {
            Some(text) => Some(shard::StartAt {
                at: shard::parse_start_at(text, std::time::SystemTime::now())?,
                tolerance,
            }),
            None => None,
        };
        let shard = args.shard.as_deref().map(shard::Shard::parse).transpose()?;
        // HTTP/2 gains from the ring where it waits for batches of
        // responses, read with their receive stamps: plain, in the closed
        // model.
        let unbatched_http2 =
            args.http2 && (args.no_batch || load.pace.is_open() || targets.iter().any(|t| t.tls));
        Ok(RunSpec {
            asked,
            load,
            stop,
            request: Request {
                targets,
                method,
                headers,
                body,
                success,
                scenario: None,
                script: None,
                users: None,
            },
            transport: Transport {
                timeout,
                connect_timeout,
                connect_to: args.connect_to.clone(),
                keepalive: !args.no_keepalive,
                pipeline: args.pipeline,
                tls,
                http: if args.http2 {
                    HttpVersion::Http2
                } else if args.http3 {
                    HttpVersion::Http3
                } else if args.http1_1 {
                    HttpVersion::Http1
                } else {
                    HttpVersion::Auto
                },
                streams: args.streams,
                coalesce: args.coalesce,
                io: crate::net::Io::settle(args.io, unbatched_http2, !args.no_batch),
            },
            reporting: Reporting {
                interval,
                thresholds,
                abort_on_fail: args.abort_on_fail,
                buckets,
            },
            watch: Watch {
                monitor_pid: args.monitor_pid,
                spawn: args.spawn.clone(),
            },
            shard,
            start_at,
        })
    }
}

/// `-H Content-Length` must match the body, and `Transfer-Encoding` is
/// volley's to set: checked once the body is known.
pub(super) fn check_headers_frame(headers: &[(String, String)], body: &[u8]) -> Result<(), PlanError> {
    for (name, value) in headers {
        crate::http1::request::check_framing(name, Some(value), Some(body)).map_err(PlanError::Framing)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn run_args(args: &[&str]) -> RunArgs {
        let mut all = vec!["volley", "run"];
        all.extend(args);
        match Cli::try_parse_from(all).unwrap().command {
            Command::Run(args) => *args,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_spec_touches_nothing_and_resolve_does_it_all() {
        let dir = tempfile::tempdir().unwrap();
        let body = dir.path().join("body.json");
        let body_flag = body.to_str().unwrap();
        // A body file not yet written and a process that does not exist:
        // both fine for the spec, which resolves no host either...
        let spec = RunSpec::from_args(&run_args(&[
            "http://localhost:1/",
            "--body-file",
            body_flag,
            "--monitor-pid",
            "999999999",
        ]))
        .unwrap();
        assert_eq!(spec.request.body, BodySource::File(body.clone()));
        assert!(spec.request.targets[0].addrs.is_empty());
        // ...each is found by resolve, in turn.
        let err = crate::error::line(&spec.clone().resolve().unwrap_err());
        assert!(err.starts_with("cannot read --body-file"), "{err}");
        std::fs::write(&body, "{}").unwrap();
        let err = crate::error::line(&spec.resolve().unwrap_err());
        assert!(err.starts_with("--monitor-pid:"), "{err}");
        let plan = RunSpec::from_args(&run_args(&["http://localhost:1/", "--body-file", body_flag]))
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(&plan.request.body[..], b"{}");
        // localhost comes from the hosts file: no query leaves the machine.
        assert!(!plan.request.targets[0].addrs.is_empty());
        assert!(plan.request.targets[0].addrs.iter().all(|a| a.ip().is_loopback()));
    }

    #[test]
    fn settling_applies_the_defaults_and_rules() {
        let (load, stop) = LoadAsk::default().settle(1, false, Duration::ZERO).unwrap();
        assert_eq!(
            (load.connections, load.pace.rate(), stop.duration),
            (50, None, Some(Duration::from_secs(10)))
        );
        let ask = LoadAsk {
            stages: Some(parse_stages("1s:2.5,2s:1").unwrap()),
            threads: Some(8),
            ..LoadAsk::default()
        };
        let (load, stop) = ask.settle(1, false, Duration::ZERO).unwrap();
        assert_eq!(
            (load.connections, load.threads, stop.duration),
            (3, 3, Some(Duration::from_secs(3)))
        );
        let open = LoadAsk {
            rate: Some(Pace::Rate(100.0)),
            ..LoadAsk::default()
        };
        assert_eq!(
            open.settle(1, false, Duration::ZERO).unwrap().0.pace,
            Pace::Rate(100.0)
        );
        let err = open.settle(2, false, Duration::ZERO).unwrap_err().to_string();
        assert_eq!(err, "--pipeline goes with the closed model, not --rate");
    }
}
