//! `--dashboard`: the report page, live. Once per interval this sink turns
//! what the collector already built (the interval's row and the run's total
//! snapshot) into one event for the browsers; it does nothing per request,
//! and publishing never waits for a browser (see `server::Hub`).
//!
//! Events, in order: `begin` (the plan), `run` (a URL or level starts, with
//! its planned duration), `interval` (the row, the summary so far and the
//! latency spectrum so far), `run_done` (its final summary and spectrum),
//! and `final` (the finished report, as the `--html` file would show it).
//! A page opened later replays the history, where each interval is only its
//! row (`row`) and the figures so far come once, from the latest interval:
//! what is kept grows by one row per interval.
//!
//! A live merge of shards (`volley merge --follow`, `volley k8s run`) feeds
//! the same events through [`Dashboard::begin`], [`Dashboard::start_run`],
//! [`Dashboard::merged_interval`] and [`Dashboard::run_done`]: its rows say
//! which shards they hold, its interval events carry each shard's standing
//! (`shards`), and a merge that ends without a report says why (`failed`).

mod server;

use super::{RunStart, Sink};
use crate::collector::SeriesRow;
use crate::engine::Observer;
use crate::recorder::Snapshot;
use crate::report::html::{live_page, report_data, run_spectrum, spectrum_points};
use crate::report::{Report, RunReport, Summary};
use crate::sys::CpuTime;
use serde::Serialize;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long the end of a run waits for browsers to receive the final report.
const FINAL_DELIVERY: Duration = Duration::from_secs(2);

/// The run being shown: what its summaries need from its plan.
struct Current {
    index: usize,
    threads: usize,
    buckets: Vec<Duration>,
}

pub struct Dashboard {
    hub: Arc<server::Hub>,
    server: Option<server::Server>,
    begun: bool,
    current: Option<Current>,
    last_row: Value,
}

impl Dashboard {
    /// Serves the dashboard on `addr` and says where, on stderr.
    pub fn start(
        addr: SocketAddr,
        priority: crate::sys::ThreadPriority,
    ) -> Result<Dashboard, super::SinkError> {
        let hub = Arc::new(server::Hub::default());
        let (server, bound) = server::start(addr, Arc::clone(&hub), live_page(), priority)?;
        eprintln!("dashboard: http://{bound}/ (live until the run ends)");
        if !bound.ip().is_loopback() {
            eprintln!(
                "warning: the dashboard on {bound} is reachable from other machines; it is read-only, \
                 but shows the target's URLs and figures (bind 127.0.0.1 to keep it local)"
            );
        }
        Ok(Dashboard {
            hub,
            server: Some(server),
            begun: false,
            current: None,
            last_row: Value::Null,
        })
    }

    fn publish(&self, event: &str, data: &Value) {
        self.hub.publish(event, &data.to_string());
    }

    fn index(&self) -> usize {
        self.current.as_ref().map_or(0, |c| c.index)
    }

    /// The invocation's plan, once, before its first run.
    pub fn begin(&mut self, plan: &impl Serialize) {
        if !std::mem::replace(&mut self.begun, true) {
            self.publish("begin", &json!({ "plan": plan }));
        }
    }

    /// A run (a URL or a level) starts.
    pub fn start_run(&mut self, run: &LiveRun) {
        self.current = Some(Current {
            index: run.index,
            threads: run.threads,
            buckets: run.buckets.clone(),
        });
        self.publish(
            "run",
            &json!({
                "index": run.index,
                "url": run.url,
                "level": run.level,
                "unit": if run.open_model { "req/s" } else { "connections" },
                "planned_s": run.planned_s,
            }),
        );
    }

    /// One interval: the row (with `extra` fields added to it, kept in the
    /// history), the summary and spectrum of `total` so far and, with
    /// `shards`, each shard's standing.
    fn interval(&mut self, row: Value, total: &Snapshot, shards: Option<Value>, no_service: bool) {
        let Some(current) = &self.current else { return };
        let elapsed = crate::sys::secs(row["t_s"].as_f64().unwrap_or(0.0));
        let summary = Summary::new(
            total,
            elapsed,
            CpuTime::default(),
            current.threads,
            &current.buckets,
        );
        let mut summary = serde_json::to_value(summary).unwrap_or_default();
        if no_service {
            summary["service_ms"] = Value::Null;
        }
        let mut full = json!({
            "index": current.index,
            "row": row,
            "summary": summary,
            "spectrum": spectrum_points(&total.latency.hist),
        });
        if let Some(shards) = shards {
            full["shards"] = shards;
        }
        let compact = json!({ "index": current.index, "row": row });
        self.hub
            .publish_interval(("interval", &full.to_string()), ("row", &compact.to_string()));
    }

    /// A live merge's interval: its row, which shards it holds
    /// (`row.shards`), the merged totals so far and every shard's standing.
    /// The service time is not shown: the shards' rows keep no histogram of
    /// it, so it does not add up.
    pub fn merged_interval(&mut self, row: &SeriesRow, holds: Value, total: &Snapshot, standing: Value) {
        let mut row = serde_json::to_value(row).unwrap_or_default();
        row["shards"] = holds;
        self.interval(row, total, Some(standing), true);
    }

    /// Each shard's standing, between intervals (a shard is gone).
    pub fn shards(&mut self, standing: Value) {
        self.publish("shards", &standing);
    }

    /// A run's final figures.
    pub fn run_done(&mut self, summary: &Summary, spectrum: &[[f64; 2]]) {
        self.publish(
            "run_done",
            &json!({ "index": self.index(), "summary": summary, "spectrum": spectrum }),
        );
    }

    /// The end: the final report (as the `--html` file would show it), or
    /// why there is none; then the server stops once browsers have it.
    pub fn close<P: Serialize>(&mut self, report: Result<&Report<P>, &str>) {
        match report {
            Ok(report) => self.publish("final", &report_data(report)),
            Err(why) => self.publish("failed", &json!({ "message": why })),
        }
        self.hub.close();
        self.hub.drain(FINAL_DELIVERY);
        self.server = None;
    }
}

/// A run about to be shown, as plain values (a live merge has no `Plan`).
pub struct LiveRun<'a> {
    pub index: usize,
    pub url: &'a str,
    pub level: Option<f64>,
    /// Whether the load is a rate (req/s) rather than connections.
    pub open_model: bool,
    pub planned_s: Option<f64>,
    /// Worker threads in all, for the summary's CPU figures.
    pub threads: usize,
    /// The response-time distribution's thresholds.
    pub buckets: Vec<Duration>,
}

impl Observer for Dashboard {
    fn row(&mut self, row: &SeriesRow, _steps: &[SeriesRow]) {
        self.last_row = serde_json::to_value(row).unwrap_or_default();
    }

    fn interval_snapshot(&mut self, _interval: &Snapshot, total: &Snapshot) {
        let row = std::mem::take(&mut self.last_row);
        self.interval(row, total, None, false);
    }
}

impl Sink for Dashboard {
    fn run_started(&mut self, run: &RunStart) {
        self.begin(run.plan);
        self.start_run(&LiveRun {
            index: run.index,
            url: run.url,
            level: run.level,
            open_model: run.plan.load.pace.is_open(),
            planned_s: super::planned_seconds(run.plan),
            threads: run.plan.load.threads,
            buckets: run.plan.reporting.buckets.clone(),
        });
    }

    fn run_finished(&mut self, run: &RunReport) {
        self.run_done(&run.summary, &run_spectrum(run));
    }

    fn finished(&mut self, report: &mut Report) {
        self.close(Ok(&*report));
    }
}
