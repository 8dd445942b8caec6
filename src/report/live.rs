//! What the user sees while a run goes: the per-interval log rows and, on a
//! terminal only, a progress line redrawn in place. A live merge of shards
//! shows its rows the same way, each with the shards it holds
//! ([`LiveView::merged_row`]).

use super::PhaseTotals;
use super::text::{log_header, log_row, step_log_row, thousands, warmup_line};
use crate::collector::SeriesRow;
use crate::engine::{Observer, PhaseSummary};
use crate::recorder::Snapshot;
use std::io::Write;
use std::time::Duration;

/// Prints log rows as they complete and a progress line on a terminal.
pub struct LiveView {
    /// Print log rows and the warm-up line (off for `-q` and `--json`).
    pub log: bool,
    /// Redraw a progress line (only when stdout is a terminal).
    pub progress: bool,
    /// The planned length, for "elapsed / total".
    pub total: Option<Duration>,
    /// Scenario step names, for their rows under each interval.
    pub step_names: Vec<String>,
    /// A target process is watched: show its columns.
    pub watching: bool,
    header_printed: bool,
    progress_shown: bool,
}

impl LiveView {
    pub fn new(log: bool, progress: bool, total: Option<Duration>) -> LiveView {
        LiveView {
            log,
            progress,
            total,
            step_names: Vec::new(),
            watching: false,
            header_printed: false,
            progress_shown: false,
        }
    }

    fn clear_progress(&mut self, out: &mut impl Write) {
        if self.progress_shown {
            let _ = write!(out, "\r\x1b[2K");
            self.progress_shown = false;
        }
    }

    /// Removes the progress line before the report is printed.
    pub fn finish(&mut self) {
        let mut out = std::io::stdout().lock();
        self.clear_progress(&mut out);
        let _ = out.flush();
    }
}

/// A live merge's interval: which shards it holds, and its errors by kind.
pub struct MergedRow<'a> {
    pub row: &'a SeriesRow,
    pub steps: &'a [SeriesRow],
    /// `3/3`, or what is missing: `2/3 lagging 1`.
    pub shards: &'a str,
    /// `timeout 3, reset 1` (empty when there were none).
    pub errors: &'a str,
}

impl LiveView {
    /// A live merge's interval: the log row with a shards column, its
    /// items' rows, and its errors by kind on a line of their own.
    pub fn merged_row(&mut self, merged: &MergedRow) {
        if !self.log {
            return;
        }
        let mut out = std::io::stdout().lock();
        self.clear_progress(&mut out);
        if !self.header_printed {
            let _ = writeln!(out, "{}  shards", log_header(self.watching));
            self.header_printed = true;
        }
        let _ = writeln!(out, "{}  {}", log_row(merged.row, self.watching), merged.shards);
        for (name, step) in self.step_names.iter().zip(merged.steps) {
            let _ = writeln!(out, "{}", step_log_row(name, step));
        }
        if !merged.errors.is_empty() {
            let _ = writeln!(out, "  errors: {}", merged.errors);
        }
        let _ = out.flush();
    }

    /// A line of its own between the rows (a shard gone, a run's URL).
    pub fn note(&mut self, text: &str) {
        if !self.log {
            return;
        }
        let mut out = std::io::stdout().lock();
        self.clear_progress(&mut out);
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
}

impl Observer for LiveView {
    fn warmup_done(&mut self, warmup: &PhaseSummary) {
        if !self.log {
            return;
        }
        let mut out = std::io::stdout().lock();
        self.clear_progress(&mut out);
        let _ = writeln!(out, "{}", warmup_line(&PhaseTotals::from_phase(warmup)));
    }

    fn row(&mut self, row: &SeriesRow, steps: &[SeriesRow]) {
        if !self.log {
            return;
        }
        let mut out = std::io::stdout().lock();
        self.clear_progress(&mut out);
        if !self.header_printed {
            let _ = writeln!(out, "{}", log_header(self.watching));
            self.header_printed = true;
        }
        let _ = writeln!(out, "{}", log_row(row, self.watching));
        for (name, step) in self.step_names.iter().zip(steps) {
            let _ = writeln!(out, "{}", step_log_row(name, step));
        }
        let _ = out.flush();
    }

    fn tick(&mut self, elapsed: Duration, so_far: &Snapshot, last: Option<&SeriesRow>) {
        if !self.progress {
            return;
        }
        let total = match self.total {
            Some(t) => format!(" / {:.0}s", t.as_secs_f64()),
            None => String::new(),
        };
        let rps = last.map_or(0, |r| r.rps.round() as u64);
        let mut out = std::io::stdout().lock();
        let _ = write!(
            out,
            "\r\x1b[2K[{:.1}s{total}] {} requests, {} req/s, {} errors",
            elapsed.as_secs_f64(),
            thousands(so_far.requests),
            thousands(rps),
            thousands(so_far.error_count())
        );
        let _ = out.flush();
        self.progress_shown = true;
    }
}
