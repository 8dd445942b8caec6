//! `--stream FILE|-`: the run's intervals as JSON lines while it runs (the
//! format is [`crate::report::stream`]), for `volley merge --follow` and
//! `volley k8s run` to add the shards of a run up live.
//!
//! Once per interval this sink takes the row the collector already built
//! (its histogram encoded once, by the collector) and the interval's
//! counters, and hands them to its own writer thread through a bounded
//! queue: the collecting thread never serialises, writes or waits. A queue
//! that fills (a reader that does not keep up with a pipe) drops lines,
//! counted in the end line, with one warning; a destination that fails
//! stops the stream, with one warning, and the run goes on. The end line
//! carries the finished report, so this sink goes after every other one
//! (the report is then as `--output` writes it).

use super::{RunStart, Sink};
use crate::collector::SeriesRow;
use crate::engine::Observer;
use crate::plan::Plan;
use crate::recorder::Snapshot;
use crate::report::stream::{End, EndState, Header, IntervalLine, Line, RunEnd, RunLine};
use crate::report::{Report, RunReport};
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::time::{Duration, Instant};

/// Lines the writer may fall behind by before lines are dropped: minutes of
/// intervals at the default 1 s.
const QUEUE: usize = 256;

/// How long the end waits for the writer to write what it holds.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Where the stream goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// `-`: standard output.
    Stdout,
    File(PathBuf),
}

impl Destination {
    pub fn parse(text: &str) -> Destination {
        if text == "-" {
            Destination::Stdout
        } else {
            Destination::File(PathBuf::from(text))
        }
    }

    fn name(&self) -> String {
        match self {
            Destination::Stdout => "stdout".to_string(),
            Destination::File(path) => format!("'{}'", path.display()),
        }
    }
}

/// The sink: numbers the intervals of each run and queues their lines.
pub struct Stream {
    name: String,
    queue: Option<SyncSender<Line>>,
    /// Told when the writer has written its last line.
    written: Receiver<()>,
    run: usize,
    /// The next interval's position in the current run.
    k: usize,
    /// The row `row` gave, waiting for its snapshot.
    row: Option<(SeriesRow, Vec<SeriesRow>)>,
    dropped: u64,
    closed: bool,
}

impl Stream {
    /// Opens the destination now (so a bad path fails before the run),
    /// starts the writer thread and writes the header: which plan and which
    /// shard, before any wait for `--start-at`, so that a follower knows
    /// this shard is there and when it starts. The writer thread runs at
    /// `priority`, as the other sinks' threads.
    pub fn start(
        destination: &Destination,
        plan: &Plan,
        priority: crate::sys::ThreadPriority,
    ) -> Result<Stream, super::SinkError> {
        let name = destination.name();
        let out: Box<dyn Write + Send> = match destination {
            Destination::Stdout => Box::new(std::io::stdout()),
            Destination::File(path) => Box::new(std::io::BufWriter::new(
                std::fs::File::create(path).map_err(|e| super::SinkError::StreamFile(name.clone(), e))?,
            )),
        };
        let (queue, lines) = std::sync::mpsc::sync_channel(QUEUE);
        let (done, written) = std::sync::mpsc::channel();
        let writer_name = name.clone();
        std::thread::Builder::new()
            .name("volley-stream".to_string())
            .spawn(move || {
                priority.apply();
                write_lines(&lines, out, &writer_name);
                let _ = done.send(());
            })
            .map_err(|source| super::SinkError::Thread {
                label: "the stream's writer".to_string(),
                source,
            })?;
        let mut stream = Stream {
            name,
            queue: Some(queue),
            written,
            run: 0,
            k: 0,
            row: None,
            dropped: 0,
            closed: false,
        };
        stream.send(Line::Header(Header {
            shard: plan.shard,
            plan_hash: plan.whole_plan_hash(),
            planned_start: plan
                .start_at
                .map(|s| humantime::format_rfc3339_millis(s.at).to_string()),
            interval_s: plan.reporting.interval.as_secs_f64(),
            plan: serde_json::to_value(plan).expect("plans always serialise"),
        }));
        Ok(stream)
    }

    /// Queues a line without waiting; a full queue drops it (counted).
    fn send(&mut self, line: Line) {
        let Some(queue) = &self.queue else { return };
        match queue.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                if self.dropped == 0 {
                    eprintln!(
                        "warning: --stream: {} is not keeping up; interval lines are left out (the end line counts them)",
                        self.name
                    );
                }
                self.dropped += 1;
            }
            // The writer stopped on an error and said so.
            Err(TrySendError::Disconnected(_)) => self.queue = None,
        }
    }

    /// Queues the end line, waiting (a bounded time) for room, then for the
    /// writer to write everything.
    fn close(&mut self, end: End) {
        if std::mem::replace(&mut self.closed, true) {
            return;
        }
        let Some(queue) = self.queue.take() else { return };
        let deadline = Instant::now() + CLOSE_WAIT;
        let mut line = Line::End(end);
        loop {
            match queue.try_send(line) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => break,
                Err(TrySendError::Full(back)) if Instant::now() < deadline => {
                    line = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(TrySendError::Full(_)) => {
                    eprintln!(
                        "warning: --stream: {} took no end line within {CLOSE_WAIT:?}",
                        self.name
                    );
                    break;
                }
            }
        }
        drop(queue);
        let _ = self
            .written
            .recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
}

/// The writer thread: each line whole, then flushed, so a follower never
/// waits on a buffer.
fn write_lines(lines: &Receiver<Line>, mut out: Box<dyn Write + Send>, name: &str) {
    for line in lines {
        let mut bytes = line.encode();
        bytes.push(b'\n');
        if let Err(e) = out.write_all(&bytes).and_then(|()| out.flush()) {
            eprintln!(
                "warning: --stream: cannot write to {name}: {e}; the stream stops here (the run goes on)"
            );
            return;
        }
    }
}

impl Observer for Stream {
    fn row(&mut self, row: &SeriesRow, steps: &[SeriesRow]) {
        self.row = Some((row.clone(), steps.to_vec()));
    }

    fn interval_snapshot(&mut self, interval: &Snapshot, _total: &Snapshot) {
        let Some((row, steps)) = self.row.take() else {
            return;
        };
        let line = IntervalLine::new(self.run, self.k, row, steps, interval);
        self.k += 1;
        self.send(Line::Interval(Box::new(line)));
    }
}

impl Sink for Stream {
    fn run_started(&mut self, run: &RunStart) {
        self.run = run.index;
        self.k = 0;
        self.send(Line::Run(RunLine {
            run: run.index,
            url: run.url.to_string(),
            level: run.level,
            planned_s: super::planned_seconds(run.plan),
        }));
    }

    fn run_finished(&mut self, run: &RunReport) {
        self.send(Line::RunEnd(RunEnd {
            run: self.run,
            intervals: self.k,
            interrupted: run.interrupted,
        }));
    }

    fn finished(&mut self, report: &mut Report) {
        let interrupted = report.interrupted || report.aborted_by.is_some();
        self.close(End {
            state: if interrupted {
                EndState::Interrupted
            } else {
                EndState::Finished
            },
            dropped: self.dropped,
            report: Some(serde_json::to_value(&*report).expect("reports always serialise")),
        });
    }
}

impl Drop for Stream {
    /// A run that stopped on an error never reached `finished`: its stream
    /// still ends, saying so, so a follower need not wait for it.
    fn drop(&mut self) {
        self.close(End {
            state: EndState::Failed,
            dropped: self.dropped,
            report: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        use clap::Parser as _;
        let crate::cli::Command::Run(args) = crate::cli::Cli::parse_from([
            "volley",
            "run",
            "http://127.0.0.1:9/",
            "--shard",
            "1/2",
            "--interval",
            "250ms",
        ])
        .command
        else {
            unreachable!("a run command")
        };
        Plan::from_args(&args).unwrap()
    }

    #[test]
    fn a_stream_that_cannot_be_opened_fails_before_the_run() {
        let err = Stream::start(
            &Destination::File(PathBuf::from("/nonexistent/dir/s.jsonl")),
            &plan(),
            crate::sys::ThreadPriority::Normal,
        )
        .err()
        .unwrap();
        let err = crate::error::line(&err);
        assert!(
            err.starts_with("cannot write the stream to '/nonexistent/dir/s.jsonl'"),
            "{err}"
        );
        assert_eq!(Destination::parse("-"), Destination::Stdout);
    }

    #[test]
    fn a_run_that_failed_still_ends_its_stream() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("failed.jsonl");
        drop(
            Stream::start(
                &Destination::File(path.clone()),
                &plan(),
                crate::sys::ThreadPriority::Normal,
            )
            .unwrap(),
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let Some(Ok(Line::Header(header))) = Line::parse(lines[0]) else {
            panic!("a header first: {text}")
        };
        assert_eq!(
            header.shard,
            Some(crate::plan::shard::Shard { index: 1, count: 2 })
        );
        assert_eq!(header.interval_s, 0.25);
        assert_eq!(
            Line::parse(lines[1]),
            Some(Ok(Line::End(End {
                state: EndState::Failed,
                dropped: 0,
                report: None
            })))
        );
    }
}
