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

mod server;

use super::{RunStart, Sink};
use crate::collector::SeriesRow;
use crate::engine::Observer;
use crate::recorder::Snapshot;
use crate::report::html::{live_page, report_data, run_spectrum, spectrum_points};
use crate::report::{Report, RunReport, Summary};
use crate::sys::CpuTime;
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
    pub fn start(addr: SocketAddr, priority: crate::sys::ThreadPriority) -> Result<Dashboard, String> {
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
}

/// The planned length of one run: its duration, or its stages' total.
fn planned_seconds(plan: &crate::plan::Plan) -> Option<f64> {
    plan.stop.duration.map(|d| d.as_secs_f64()).or_else(|| {
        plan.load
            .stages
            .as_ref()
            .map(|stages| stages.iter().map(|s| s.duration.as_secs_f64()).sum())
    })
}

impl Observer for Dashboard {
    fn row(&mut self, row: &SeriesRow, _steps: &[SeriesRow]) {
        self.last_row = serde_json::to_value(row).unwrap_or_default();
    }

    fn interval_snapshot(&mut self, _interval: &Snapshot, total: &Snapshot) {
        let Some(current) = &self.current else { return };
        let elapsed = Duration::from_secs_f64(self.last_row["t_s"].as_f64().unwrap_or(0.0).max(0.0));
        let summary = Summary::new(
            total,
            elapsed,
            CpuTime::default(),
            current.threads,
            &current.buckets,
        );
        let full = json!({
            "index": current.index,
            "row": self.last_row,
            "summary": summary,
            "spectrum": spectrum_points(&total.latency.hist),
        });
        let compact = json!({ "index": current.index, "row": self.last_row });
        self.hub
            .publish_interval(("interval", &full.to_string()), ("row", &compact.to_string()));
    }
}

impl Sink for Dashboard {
    fn run_started(&mut self, run: &RunStart) {
        if !self.begun {
            self.begun = true;
            self.publish("begin", &json!({ "plan": run.plan }));
        }
        self.current = Some(Current {
            index: run.index,
            threads: run.plan.load.threads,
            buckets: run.plan.reporting.buckets.clone(),
        });
        let unit = if run.plan.load.rate.is_some() {
            "req/s"
        } else {
            "connections"
        };
        self.publish(
            "run",
            &json!({
                "index": run.index,
                "url": run.url,
                "level": run.level,
                "unit": unit,
                "planned_s": planned_seconds(run.plan),
            }),
        );
    }

    fn run_finished(&mut self, run: &RunReport) {
        self.publish(
            "run_done",
            &json!({
                "index": self.index(),
                "summary": run.summary,
                "spectrum": run_spectrum(run),
            }),
        );
    }

    fn finished(&mut self, report: &mut Report) {
        self.publish("final", &report_data(report));
        self.hub.close();
        self.hub.drain(FINAL_DELIVERY);
        self.server = None;
    }
}
