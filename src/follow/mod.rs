//! Watching a sharded run as one run while it runs: `volley merge --follow`
//! follows the shards' `--stream` files, `volley k8s run` the pods' logs;
//! both add interval k of every shard into interval k as the lines arrive
//! ([`board`]), show it on the terminal and the dashboard (`view`), and
//! end as `volley merge` does, on the shards' finished reports: the merged
//! report is the same, byte for byte.

pub mod board;
pub mod files;
mod view;

pub use board::Timing;

use crate::error::Cause;
use crate::merge::Input;
use crate::report::SavedReport;
use crate::report::stream::Line;
use board::Board;
use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::time::Instant;
use view::Views;

/// How a live merge runs and ends.
#[derive(Clone, Debug)]
pub struct Options {
    pub timing: Timing,
    /// Merge without the shards that are missing or gone (the report says
    /// which), as `volley merge --partial`.
    pub partial: bool,
    /// `--dashboard`: serve the live page here.
    pub dashboard: Option<SocketAddr>,
    /// The merged report's files and thresholds, as `volley merge`.
    pub output: crate::merge::Output,
}

/// Why a live merge ended without a report; each kind is one exit code.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// Streams or reports that do not belong together, or a bad flag.
    #[error(transparent)]
    Input(Cause),
    /// A shard failed or went away.
    #[error(transparent)]
    Failed(Cause),
    /// Ctrl-C before every shard had finished.
    #[error("interrupted: the shards had not all finished; nothing was merged")]
    Interrupted,
}

impl FollowError {
    pub fn input(cause: impl Into<Cause>) -> FollowError {
        FollowError::Input(cause.into())
    }

    pub fn failed(cause: impl Into<Cause>) -> FollowError {
        FollowError::Failed(cause.into())
    }

    /// The one line users read.
    pub fn message(&self) -> String {
        crate::error::line(self)
    }
}

/// A live merge: the board and what it is shown on.
pub struct Follow {
    board: Board,
    views: Views,
}

impl Follow {
    /// A live merge of the streams named `names` (one per shard).
    pub fn start(names: Vec<String>, options: &Options) -> Result<Follow, crate::sink::SinkError> {
        let count = names.len();
        let text = !options.output.json;
        let mut views = Views::start(text, std::io::stdout().is_terminal(), options.dashboard)?;
        views.note(&format!(
            "following {count} shard stream{}: each interval is shown once every shard has sent it, or after {} as partial",
            if count == 1 { "" } else { "s" },
            humantime::format_duration(options.timing.grace)
        ));
        Ok(Follow {
            board: Board::new(names, options.timing, options.partial, Instant::now()),
            views,
        })
    }

    pub fn name(&self, slot: usize) -> &str {
        self.board.name(slot)
    }

    /// One stream line of `slot`.
    pub fn line(&mut self, slot: usize, line: Line) -> Result<(), board::BoardError> {
        self.board.feed(slot, line, Instant::now())
    }

    /// `slot`'s source ended for good (see [`Board::source_ended`]).
    pub fn source_ended(&mut self, slot: usize) {
        self.board.source_ended(slot);
    }

    /// Whether `slot`'s stream has its end line.
    pub fn has_ended(&self, slot: usize) -> bool {
        self.board.has_ended(slot)
    }

    /// `slot`'s shard is known to have failed.
    pub fn mark_gone(&mut self, slot: usize, why: String) {
        self.board.mark_gone(slot, why);
    }

    /// Shows every interval that is ready and redraws the progress line.
    pub fn update(&mut self) -> Result<(), board::BoardError> {
        let events = self.board.poll(Instant::now())?;
        if !events.is_empty() {
            let standing = self.board.standing();
            for event in events {
                self.views.show(event, &standing);
            }
        }
        self.views.tick();
        Ok(())
    }

    /// Whether every stream has ended (or its shard is gone) and all is shown.
    pub fn over(&self) -> bool {
        self.board.over()
    }

    /// The shards' reports from the streams' end lines; a shard gone fails
    /// the merge with its index, unless `partial`.
    pub fn streamed_reports(&mut self, partial: bool) -> Result<Vec<Input>, FollowError> {
        let outcome = self.board.take_outcome();
        if let Some(gone) = outcome.gone.first()
            && !partial
        {
            let count = self.board.shard_count();
            let shard = match gone.label.parse::<u32>() {
                Ok(index) => format!("shard {index} of {count}"),
                Err(_) => format!("the shard of {}", gone.label),
            };
            return Err(FollowError::failed(format!(
                "{shard} stopped (last sent: {}) and wrote no end: {}; the run is incomplete \
                 (--partial merges the shards that finished)",
                gone.last, gone.why
            )));
        }
        let mut inputs = Vec::with_capacity(outcome.ended.len());
        for (name, end) in outcome.ended {
            let report = end
                .report
                .ok_or_else(|| FollowError::input(format!("{name}: an end line without its report")))?;
            let report = SavedReport::parse(&name, &report.to_string()).map_err(FollowError::input)?;
            inputs.push(Input { name, report });
        }
        Ok(inputs)
    }

    /// Ends as `volley merge` does on `inputs` (the shards' finished
    /// reports): merged, judged, printed and saved; the dashboard then shows
    /// the merged report (or why there is none). Returns whether a
    /// threshold failed.
    pub fn conclude(
        mut self,
        inputs: Result<Vec<Input>, FollowError>,
        options: &Options,
    ) -> Result<bool, FollowError> {
        let merged = inputs.and_then(|inputs| {
            let mut merged = crate::merge::merge(&inputs, options.partial).map_err(FollowError::input)?;
            self.views.close_live();
            let failed = crate::merge::finish(&mut merged, &options.output).map_err(FollowError::input)?;
            Ok((merged, failed))
        });
        match merged {
            Ok((merged, failed)) => {
                self.views.close(Ok(&merged));
                Ok(failed)
            }
            Err(e) => {
                self.views.close::<serde_json::Value>(Err(&e.message()));
                Err(e)
            }
        }
    }
}
