//! One followed stream's state on the board: its header, the intervals
//! of each run it has sent, how it ended, and whether it is gone or lags.

use crate::report::stream::{End, EndState, Header};
use std::time::Instant;

/// One followed stream.
pub(super) struct Slot {
    pub(super) name: String,
    pub(super) header: Option<Header>,
    pub(super) last_line: Instant,
    /// Its planned start (`--start-at`): silence before it is waiting.
    pub(super) starts_at: Option<Instant>,
    /// Per run: the intervals received and, once it ended, how many it had.
    pub(super) runs: Vec<SlotRun>,
    pub(super) current_run: Option<usize>,
    pub(super) end: Option<End>,
    /// Why it counts as gone (cleared if it writes again).
    pub(super) gone: Option<String>,
    /// Whether the views were told it is gone.
    pub(super) gone_told: bool,
    /// Whether it lagged on the last interval shown, for the board's table.
    pub(super) lagging: bool,
}

#[derive(Clone, Copy, Default)]
pub(super) struct SlotRun {
    pub(super) received: usize,
    pub(super) ended: Option<usize>,
}

impl Slot {
    pub(super) fn label(&self) -> String {
        match self.header.as_ref().and_then(|h| h.shard) {
            Some(shard) => shard.index.to_string(),
            None => self.name.clone(),
        }
    }

    pub(super) fn run(&mut self, run: usize) -> &mut SlotRun {
        if self.runs.len() <= run {
            self.runs.resize(run + 1, SlotRun::default());
        }
        &mut self.runs[run]
    }

    /// Whether it has nothing more to give to interval k of run `run`.
    pub(super) fn done_with(&self, run: usize, k: usize) -> bool {
        self.end.is_some()
            || self.current_run.is_some_and(|current| current > run)
            || self.runs.get(run).and_then(|r| r.ended).is_some_and(|n| n <= k)
    }

    /// What it sent last: `interval 7`, `interval 2 of URL 2`, `nothing yet`.
    pub(super) fn last_interval(&self) -> String {
        let Some(run) = self.current_run else {
            return "nothing yet".to_string();
        };
        let of_url = if run > 0 {
            format!(" of URL {}", run + 1)
        } else {
            String::new()
        };
        match self.runs.get(run).map_or(0, |r| r.received) {
            0 => format!("no interval yet{of_url}"),
            n => format!("interval {}{of_url}", n - 1),
        }
    }

    pub(super) fn state(&self) -> &'static str {
        match (&self.end, &self.gone) {
            (Some(end), _) => match end.state {
                EndState::Finished => "finished",
                EndState::Interrupted => "interrupted",
                EndState::Failed => "failed",
            },
            (None, Some(_)) => "gone",
            (None, None) if self.header.is_none() => "waiting",
            (None, None) if self.lagging => "lagging",
            (None, None) => "running",
        }
    }
}
