//! The live stream of a run (`--stream FILE|-`): one JSON line per finished
//! interval, so that `volley merge --follow` and `volley k8s run` can add
//! the shards of a run up while it runs.
//!
//! The format is versioned ([`STREAM`], `docs/follow.md`, and
//! `schema/stream-v1.json` for one line). Every line opens with the same
//! bytes ([`PREFIX`]), so a reader can pick the stream's lines out of a log
//! that holds other text (a pod's log holds the countdown and the report
//! too). The lines, in order: a [`Header`] (the plan's identity, written as
//! the run is set up, before any wait for its start), then for
//! each URL a [`RunLine`], its [`IntervalLine`]s and a [`RunEnd`], and last
//! an [`End`] with the finished report. An interval line carries the row the
//! report's series keeps (counters and the interval's histogram, encoded
//! once) and the counters a live view needs besides (errors by kind,
//! statuses), so that what a follower shows adds up to the final report.

use crate::collector::SeriesRow;
use crate::plan::shard::Shard;
use crate::recorder::Snapshot;
use crate::sample::ErrorKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The stream's name and version: the value of every line's `stream` field.
pub const STREAM: &str = "volley.stream/1";

/// The first bytes of every line of any version of the stream.
pub const PREFIX: &str = "{\"stream\":\"volley.stream/";

/// One line of the stream, by its `type`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    Header(Header),
    Run(RunLine),
    /// Boxed: the row with its histogram is the largest line by far.
    Interval(Box<IntervalLine>),
    RunEnd(RunEnd),
    End(End),
}

/// The first line: which plan, and which slice of it, this run is.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Header {
    /// `--shard I/N`, absent for a run that is not a shard.
    pub shard: Option<Shard>,
    /// The whole plan's hash: equal on every shard of one run.
    pub plan_hash: String,
    /// `--start-at` (RFC 3339, UTC, milliseconds): the instant interval 0
    /// of every shard starts from.
    pub planned_start: Option<String>,
    /// The sampling interval, in seconds.
    pub interval_s: f64,
    /// The plan as the report records it (this shard's slice).
    pub plan: Value,
}

/// A URL (or a `volley step` level) starts.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunLine {
    /// Its position in the invocation, from 0.
    pub run: usize,
    pub url: String,
    /// `volley step`: the level of load.
    pub level: Option<f64>,
    /// Its planned length (the duration or the stages' total), seconds.
    pub planned_s: Option<f64>,
}

/// One finished interval of one run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IntervalLine {
    pub run: usize,
    /// The interval's position in the run's series, from 0: the report's
    /// `series[k]`, which a merge adds to every other shard's `series[k]`.
    pub k: usize,
    /// The row exactly as the report's series will keep it.
    pub row: SeriesRow,
    /// Requests answered with an expected status.
    pub ok: u64,
    /// Response bytes read.
    pub bytes: u64,
    /// The fastest successful request, in milliseconds (0 when none): the
    /// histogram rounds it, the run's summary does not.
    pub min_ms: f64,
    /// Responses by status code (non-zero ones).
    pub status: BTreeMap<String, u64>,
    /// Failed requests by kind (non-zero ones).
    pub errors_by_kind: BTreeMap<String, u64>,
    /// A plan file's items: each one's row, in the plan's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<SeriesRow>,
}

/// A URL's last interval has been sent.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunEnd {
    pub run: usize,
    /// How many interval lines the run had (its series' length).
    pub intervals: usize,
    pub interrupted: bool,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EndState {
    /// Every URL ran to its end.
    Finished,
    /// Ctrl-C (or `--abort-on-fail`) cut it short; the report says what was
    /// measured.
    Interrupted,
    /// It stopped on an error before its report (the error is on its stderr).
    Failed,
}

/// The last line.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct End {
    pub state: EndState,
    /// Interval lines the writer could not keep up with and left out.
    pub dropped: u64,
    /// The finished report, exactly as `--output` writes it (absent when
    /// the run failed).
    pub report: Option<Value>,
}

impl Line {
    /// The line as the stream writes it: one line of JSON, `stream` first,
    /// no newline.
    pub fn encode(&self) -> Vec<u8> {
        let body = serde_json::to_vec(self).expect("stream lines always serialise");
        let mut line = Vec::with_capacity(body.len() + STREAM.len() + 12);
        line.extend_from_slice(b"{\"stream\":\"");
        line.extend_from_slice(STREAM.as_bytes());
        line.extend_from_slice(b"\",");
        // `body` is an object: `{"type":...}`.
        line.extend_from_slice(&body[1..]);
        line
    }

    /// Reads one line of text: `None` when it is not a stream line (other
    /// text in a log), else the line or why it cannot be read.
    pub fn parse(text: &str) -> Option<Result<Line, LineError>> {
        let rest = text.trim_end().strip_prefix(PREFIX)?;
        let version = rest.split('"').next().unwrap_or("");
        if format!("volley.stream/{version}") != STREAM {
            return Some(Err(LineError::Version(version.to_string())));
        }
        Some(serde_json::from_str(text).map_err(|e| LineError::Damaged(e.to_string())))
    }

    /// Reads the stream line in one line of a log that holds other text
    /// too: a pod's log is its stdout and stderr in one file, and a line
    /// another write began still carries the stream line after its text.
    /// `None` when it holds no stream line.
    pub fn find(text: &str) -> Option<Result<Line, LineError>> {
        Line::parse(&text[text.find(PREFIX)?..])
    }
}

/// A stream line that this volley cannot read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("a volley.stream/{0} line; this volley reads {STREAM}", STREAM = STREAM)]
    Version(String),
    /// serde's message.
    #[error("a damaged {STREAM} line: {0}", STREAM = STREAM)]
    Damaged(String),
}

/// An interval line's counter that this volley cannot place.
#[derive(Debug, thiserror::Error)]
pub enum CounterError {
    #[error("an unknown error kind '{0}'")]
    Kind(String),
    #[error("an invalid status '{0}'")]
    Status(String),
}

impl IntervalLine {
    /// The interval as the collector finished it: its row (and its steps'
    /// rows) and its snapshot.
    pub fn new(
        run: usize,
        k: usize,
        row: SeriesRow,
        steps: Vec<SeriesRow>,
        interval: &Snapshot,
    ) -> IntervalLine {
        IntervalLine {
            run,
            k,
            row,
            ok: interval.ok,
            bytes: interval.bytes,
            min_ms: if interval.latency.is_empty() {
                0.0
            } else {
                crate::collector::us_to_ms(interval.latency.min_us)
            },
            status: interval
                .status_counts()
                .map(|(code, n)| (code.to_string(), n))
                .collect(),
            errors_by_kind: interval
                .error_kinds()
                .map(|(kind, n, _)| (kind.name().to_string(), n))
                .collect(),
            steps,
        }
    }

    /// The counters of the interval as a snapshot, its latency histogram
    /// given (decoded from the row by whoever merges it); the service and
    /// failure times, which the row does not carry, stay empty.
    pub fn snapshot(&self, latency: hdrhistogram::Histogram<u64>) -> Result<Snapshot, CounterError> {
        let mut snap = Snapshot {
            requests: self.row.requests,
            ok: self.ok,
            bytes: self.bytes,
            ..Snapshot::default()
        };
        for (name, n) in &self.errors_by_kind {
            let kind = ErrorKind::ALL
                .iter()
                .find(|k| k.name() == name)
                .ok_or_else(|| CounterError::Kind(name.clone()))?;
            snap.errors[*kind as usize] = *n;
        }
        for (code, n) in &self.status {
            let slot = code
                .parse::<usize>()
                .ok()
                .filter(|c| *c < snap.status.len())
                .ok_or_else(|| CounterError::Status(code.clone()))?;
            snap.status[slot] = *n;
        }
        if !latency.is_empty() {
            snap.latency.min_us = (self.min_ms * 1000.0).round() as u64;
            snap.latency.max_us = (self.row.max * 1000.0).round() as u64;
        }
        snap.latency.hist = latency;
        Ok(snap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::Recorder;
    use crate::sample::{Outcome, Sample};

    fn interval() -> (SeriesRow, Snapshot) {
        let mut rec = Recorder::default();
        for (us, outcome) in [
            (1500, Outcome::Ok { status: 200 }),
            (900, Outcome::Ok { status: 204 }),
            (40_000, Outcome::BadStatus { status: 503 }),
            (30, Outcome::Failed(ErrorKind::Reset)),
        ] {
            rec.record(&Sample {
                latency_us: us,
                service_us: us,
                bytes: 10,
                outcome,
            });
        }
        let snap = rec.take();
        let mut collector = crate::collector::Collector::new(
            1,
            std::time::Duration::from_secs(1),
            crate::shape::LoadProfile::constant(1.0),
        );
        let mut row = None;
        let elapsed = std::time::Duration::from_secs(1);
        collector.finished(0, 0, snap.clone(), elapsed, &mut |f| row = Some(f.row.clone()));
        (row.expect("the interval's row"), snap)
    }

    #[test]
    fn a_line_opens_with_the_prefix_and_reads_back() {
        let (row, snap) = interval();
        let line = Line::Interval(Box::new(IntervalLine::new(0, 3, row.clone(), Vec::new(), &snap)));
        let text = String::from_utf8(line.encode()).unwrap();
        assert!(
            text.starts_with(&format!("{{\"stream\":\"{STREAM}\",\"type\":\"interval\",")),
            "{text}"
        );
        assert!(!text.contains('\n'));
        assert_eq!(Line::parse(&text), Some(Ok(line)));
        let Some(Ok(Line::Interval(back))) = Line::parse(&text) else {
            unreachable!()
        };
        assert_eq!(back.row, row, "the row as the report keeps it");
        assert_eq!(back.errors_by_kind["status"], 1);
        assert_eq!(back.errors_by_kind["reset"], 1);
        assert_eq!(back.status["204"], 1);
        assert_eq!(back.min_ms, 0.9);
    }

    #[test]
    fn a_log_line_begun_by_other_text_still_gives_its_stream_line() {
        let (row, snap) = interval();
        let line = Line::Interval(Box::new(IntervalLine::new(0, 1, row, Vec::new(), &snap)));
        let text = String::from_utf8(line.encode()).unwrap();
        let mixed = format!("starting at 2026-11-25T18:00:00.000Z{text}\n");
        assert_eq!(Line::parse(&mixed), None, "not at the start of the line");
        assert_eq!(Line::find(&mixed), Some(Ok(line)));
        assert_eq!(Line::find(" (in 3s)\n"), None);
    }

    #[test]
    fn the_rebuilt_snapshot_has_the_intervals_counters() {
        let (row, snap) = interval();
        let line = IntervalLine::new(0, 0, row, Vec::new(), &snap);
        let hist = line.row.histogram.as_ref().unwrap().histogram().unwrap();
        let back = line.snapshot(hist).unwrap();
        assert_eq!((back.requests, back.ok, back.bytes), (4, 2, 40));
        assert_eq!(back.errors, snap.errors);
        assert_eq!(back.status, snap.status);
        assert_eq!(back.latency.hist, snap.latency.hist);
        assert_eq!((back.latency.min_us, back.latency.max_us), (900, 1500));
    }

    #[test]
    fn other_text_is_not_a_line_and_other_versions_are_refused() {
        assert_eq!(Line::parse("starting at 2026-01-01T00:00:00Z (in 3s)"), None);
        assert_eq!(Line::parse("{\n"), None);
        let err = Line::parse(r#"{"stream":"volley.stream/2","type":"end"}"#)
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("volley.stream/2 line; this volley reads volley.stream/1"),
            "{err}"
        );
        let err = Line::parse(r#"{"stream":"volley.stream/1","type":"interval","run":0"#)
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(err.contains("damaged"), "{err}");
    }
}
