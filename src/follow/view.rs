//! What a live merge shows: on the terminal, each merged interval as a log
//! row with the shards it holds and its errors by kind, and a progress line
//! (`report::live`); with `--dashboard`, the same page a run shows, fed the
//! merged intervals and each shard's standing (`sink::dashboard`).

use super::board::{Event, IntervalShards, Shown};
use crate::report::live::{LiveView, MergedRow};
use crate::report::{Report, Summary};
use crate::sink::dashboard::{Dashboard, LiveRun};
use crate::sys::CpuTime;
use serde::Serialize;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;

/// The terminal view and the dashboard of a live merge.
pub struct Views {
    /// Log rows (off for `--json`).
    text: bool,
    /// The progress line (stdout is a terminal).
    tty: bool,
    live: LiveView,
    dashboard: Option<Dashboard>,
    /// Shards in the plan.
    count: u32,
    /// What the whole plan says the summaries need.
    threads: usize,
    buckets: Vec<Duration>,
    open_model: bool,
    step_names: Vec<String>,
    /// The last interval shown, for the progress line.
    last: Option<Box<Shown>>,
}

impl Views {
    /// Starts the dashboard when asked for (`addr`).
    pub fn start(text: bool, tty: bool, addr: Option<SocketAddr>) -> Result<Views, crate::sink::SinkError> {
        Ok(Views {
            text,
            tty,
            live: LiveView::new(text, text && tty, None),
            // A live merge has no workers to keep out of the way of.
            dashboard: addr
                .map(|addr| Dashboard::start(addr, crate::sys::ThreadPriority::Normal))
                .transpose()?,
            count: 0,
            threads: 1,
            buckets: Vec::new(),
            open_model: false,
            step_names: Vec::new(),
            last: None,
        })
    }

    /// A line of text between the rows (nothing with `--json`).
    pub fn note(&mut self, text: &str) {
        self.live.note(text);
    }

    /// Shows what the board said; `standing` is each shard's, for the page.
    pub fn show(&mut self, event: Event, standing: &Value) {
        match event {
            Event::Begin { plan, count } => {
                self.count = count;
                self.threads = plan["threads"].as_u64().map_or(1, |t| t as usize).max(1);
                self.buckets = plan["buckets_ms"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_f64)
                    .map(|ms| crate::sys::secs(ms / 1000.0))
                    .collect();
                self.open_model = plan["rate"].is_number();
                self.step_names = plan["scenario"]["steps"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect();
                if let Some(dashboard) = &mut self.dashboard {
                    dashboard.begin(&plan);
                }
            }
            Event::RunStarted(run) => {
                self.live.finish();
                self.live = LiveView::new(
                    self.text,
                    self.text && self.tty,
                    run.planned_s.map(crate::sys::secs),
                );
                self.live.step_names = self.step_names.clone();
                let gap = if run.run > 0 { "\n" } else { "" };
                self.live.note(&format!("{gap}{}", run.url));
                if let Some(dashboard) = &mut self.dashboard {
                    dashboard.start_run(&LiveRun {
                        index: run.run,
                        url: &run.url,
                        level: run.level,
                        open_model: self.open_model,
                        planned_s: run.planned_s,
                        threads: self.threads,
                        buckets: self.buckets.clone(),
                    });
                }
            }
            Event::Interval(shown) => {
                let errors: Vec<String> = shown
                    .interval
                    .error_kinds()
                    .map(|(kind, n, _)| format!("{} {n}", kind.name()))
                    .collect();
                self.live.merged_row(&MergedRow {
                    row: &shown.row,
                    steps: &shown.steps,
                    shards: &holds_text(&shown.shards, self.count),
                    errors: &errors.join(", "),
                });
                if let Some(dashboard) = &mut self.dashboard {
                    dashboard.merged_interval(
                        &shown.row,
                        holds_json(&shown.shards),
                        &shown.total,
                        standing.clone(),
                    );
                }
                self.last = Some(shown);
            }
            Event::Gone { label, last, why } => {
                self.live
                    .note(&format!("shard {label} is gone (last sent: {last}): {why}"));
                if let Some(dashboard) = &mut self.dashboard {
                    dashboard.shards(standing.clone());
                }
            }
            Event::RunDone { total, elapsed_s, .. } => {
                self.live.finish();
                if let Some(dashboard) = &mut self.dashboard {
                    let summary = Summary::new(
                        &total,
                        crate::sys::secs(elapsed_s),
                        CpuTime::default(),
                        self.threads,
                        &self.buckets,
                    );
                    let spectrum = crate::report::html::spectrum_points(&total.latency.hist);
                    dashboard.run_done(&summary, &spectrum);
                }
            }
        }
    }

    /// Redraws the progress line with the totals so far.
    pub fn tick(&mut self) {
        if let Some(shown) = &self.last {
            use crate::engine::Observer as _;
            let elapsed = crate::sys::secs(shown.row.t_s);
            self.live.tick(elapsed, &shown.total, Some(&shown.row));
        }
    }

    /// Clears the progress line, before the report is printed.
    pub fn close_live(&mut self) {
        self.live.finish();
    }

    /// The end: gives the dashboard the merged report, or why there is none.
    pub fn close<P: Serialize>(&mut self, report: Result<&Report<P>, &str>) {
        self.live.finish();
        if let Some(dashboard) = &mut self.dashboard {
            dashboard.close(report);
        }
    }
}

/// `3/3`; `2/3 lagging 1`; `1/3 lagging 0, gone 2`; with shards that
/// finished their run before this interval, `2/3 (1 finished)`.
fn holds_text(shards: &IntervalShards, count: u32) -> String {
    let mut text = format!("{}/{count}", shards.reported.len());
    let mut missing = Vec::new();
    if !shards.lagging.is_empty() {
        missing.push(format!("lagging {}", shards.lagging.join(" ")));
    }
    if !shards.gone.is_empty() {
        missing.push(format!("gone {}", shards.gone.join(" ")));
    }
    let finished = count as usize
        - (shards.reported.len() + shards.lagging.len() + shards.gone.len()).min(count as usize);
    if !missing.is_empty() {
        text += &format!(" {}", missing.join(", "));
    }
    if finished > 0 {
        text += &format!(" ({finished} finished)");
    }
    text
}

fn holds_json(shards: &IntervalShards) -> Value {
    json!({
        "reported": shards.reported,
        "lagging": shards.lagging,
        "gone": shards.gone,
        "partial": shards.partial(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_says_which_shards_it_holds() {
        let shards = |r: &[&str], l: &[&str], g: &[&str]| IntervalShards {
            reported: r.iter().map(|s| s.to_string()).collect(),
            lagging: l.iter().map(|s| s.to_string()).collect(),
            gone: g.iter().map(|s| s.to_string()).collect(),
        };
        assert_eq!(holds_text(&shards(&["0", "1", "2"], &[], &[]), 3), "3/3");
        assert_eq!(holds_text(&shards(&["0", "2"], &["1"], &[]), 3), "2/3 lagging 1");
        assert_eq!(
            holds_text(&shards(&["1"], &["0"], &["2"]), 3),
            "1/3 lagging 0, gone 2"
        );
        assert_eq!(holds_text(&shards(&["0", "1"], &[], &[]), 3), "2/3 (1 finished)");
    }
}
