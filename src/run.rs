//! `volley run`: the plan's URLs one after another, each with its own report
//! section, then the text or JSON report and the exit code.
//!
//! [`Session`] is the orchestration every command that runs plans shares
//! (`run` and `plan` through [`execute`], `step` per level): the spawned
//! target, the sinks, each run under watch, the thresholds, the save.

use crate::engine::{self, EngineError};
use crate::plan::Plan;
use crate::report::live::LiveView;
use crate::report::text::{self, Detail};
use crate::report::{Report, RunReport};
use crate::sink::{RunStart, SinkSpec, Sinks};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};
use thiserror::Error;

/// Why an invocation's runs could not happen, or what they measured could
/// not be kept: the engine's failures, and the run's own around them.
#[derive(Debug, Error)]
pub enum RunError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Save(#[from] SaveError),
    #[error("interrupted before the planned start")]
    InterruptedBeforeStart,
    #[error(transparent)]
    OpenFiles(#[from] crate::sys::OpenFilesError),
    #[error(transparent)]
    LateStart(#[from] crate::plan::shard::LateStart),
    /// The `--spawn`ed target could not be started or watched.
    #[error(transparent)]
    Spawn(#[from] crate::monitor::MonitorError),
    /// A sink that could not start, its error kept whole.
    #[error(transparent)]
    Sink(crate::error::Cause),
}

/// A report that could not be written; `what` is the report or its HTML
/// page.
#[derive(Debug, Error)]
#[error("cannot write {what} to '{path}'")]
pub struct SaveError {
    what: &'static str,
    path: String,
    #[source]
    source: std::io::Error,
}

/// How the report is shown and saved.
#[derive(Clone, Debug)]
pub struct Output {
    pub json_stdout: bool,
    pub file: Option<PathBuf>,
    /// Where to write the HTML report.
    pub html: Option<PathBuf>,
    pub detail: Detail,
    /// The live dashboard and the metric outputs.
    pub sinks: SinkSpec,
}

/// How an invocation ended, mapped to the exit code by `main`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every run completed and got at least one successful response.
    Completed,
    /// A run got no successful response at all (a dead target).
    NoSuccess,
    /// Ctrl-C stopped it; what was measured was still reported.
    Interrupted,
    /// A `--threshold` failed (or stopped the run with `--abort-on-fail`).
    ThresholdsFailed,
}

impl Verdict {
    /// How an invocation ended; `dead` says whether its runs add up to a
    /// dead target (for `run`, any URL without a success; for `step`, all
    /// levels without one).
    pub fn of(report: &Report, dead: bool) -> Verdict {
        if report.aborted_by.is_some() {
            Verdict::ThresholdsFailed
        } else if report.interrupted {
            Verdict::Interrupted
        } else if dead {
            Verdict::NoSuccess
        } else if report.thresholds.iter().any(|t| !t.passed) {
            Verdict::ThresholdsFailed
        } else {
            Verdict::Completed
        }
    }
}

/// One invocation's runs: the `--spawn`ed target (kept alive until
/// [`Session::finish`]), the sinks and the report the runs go into.
pub struct Session {
    spawned: Option<crate::monitor::Spawned>,
    pub sinks: Sinks,
    pub report: Report,
    /// The first HTTP/3 offer an `https://` run's responses made (their
    /// `Alt-Svc`), and the port the run's URL has: `-v` notes it once.
    h3_offer: Option<(u16, u16)>,
}

impl Session {
    /// Spawns the target of `plan` (setting its `monitor_pid`), starts the
    /// sinks and makes room for `peak_connections` descriptors; the report
    /// embeds `plan`.
    pub fn start(plan: &mut Plan, output: &Output, peak_connections: usize) -> Result<Session, RunError> {
        let spawned = spawn_target(plan)?;
        let spec = crate::sink::SinkSpec {
            priority: crate::sys::ThreadPriority::for_model(plan.load.pace.is_open()),
            ..output.sinks.clone()
        };
        let sinks = Sinks::start(&spec, plan).map_err(|e| RunError::Sink(e.into()))?;
        // Each connection is a descriptor; leave room for the rest of the process.
        crate::sys::ensure_open_files(peak_connections as u64 + 64)?;
        crate::sys::reserve_descriptors(peak_connections as u64 + 64);
        let report = Report::new(plan.clone(), SystemTime::now());
        Ok(Session {
            spawned,
            sinks,
            report,
            h3_offer: None,
        })
    }

    /// Runs one target under watch (`--abort-on-fail`), with the sinks told
    /// before and after and `live` seeing every interval; returns the run's
    /// report (not yet added), the engine's result and the criterion that
    /// stopped it early, if one did.
    pub fn run_one(
        &mut self,
        start: &RunStart,
        target: &crate::target::Target,
        stop: &Arc<AtomicBool>,
        live: &mut dyn crate::engine::Observer,
    ) -> Result<(RunReport, crate::engine::RunResult, Option<String>), RunError> {
        self.sinks.run_started(start);
        let (result, aborted_by) = run_watched(start.plan, target, stop, &mut self.sinks.with(live))?;
        // --http3 needs https://: an offer to an http:// URL is not one
        // the flag could take up.
        if target.tls {
            self.h3_offer = self.h3_offer.or(result.h3_offer.map(|port| (port, target.port)));
        }
        let mut run = RunReport::new(start.url, &result, start.plan);
        run.load = start.level;
        Ok((run, result, aborted_by))
    }

    /// Stops the spawned target, checks `--threshold`s (printing the block
    /// with `text`), tells the sinks and saves; `dead` says whether the runs
    /// add up to a dead target.
    pub fn finish(
        self,
        output: &Output,
        text: bool,
        dead: impl Fn(&[RunReport]) -> bool,
    ) -> Result<(Report, Verdict), RunError> {
        let Session {
            spawned,
            mut sinks,
            mut report,
            h3_offer,
        } = self;
        drop(spawned);
        finish_thresholds(&mut report, text);
        sinks.finished(&mut report);
        save(&report, output)?;
        if let (Some((offered, url_port)), Detail::Verbose) = (h3_offer, output.detail) {
            eprintln!("{}", h3_note(offered, url_port));
        }
        let verdict = Verdict::of(&report, dead(&report.runs));
        Ok((report, verdict))
    }
}

/// `-v`'s note on a server that offers HTTP/3 on UDP port `offered` to a
/// run whose URL has port `url_port` (volley never switches by itself).
fn h3_note(offered: u16, url_port: u16) -> String {
    let how = if offered == url_port {
        "--http3 would use it".to_string()
    } else {
        format!("--http3 would use it with port {offered} in the URL")
    };
    format!("note: the server offers HTTP/3 (Alt-Svc: h3 on UDP port {offered}); {how}")
}

/// Runs every target of the plan and reports. Errors are setup failures.
pub fn execute(
    mut plan: Plan,
    output: &Output,
    stop: Arc<AtomicBool>,
) -> Result<(Report, Verdict), RunError> {
    // The open model may add connections up to --max-connections.
    let peak = plan.load.max_connections.unwrap_or(plan.load.connections);
    let mut session = Session::start(&mut plan, output, peak)?;
    if let Some(start_at) = plan.start_at {
        session.report.start = Some(wait_for_start(&start_at, &stop)?);
    }
    let text = !output.json_stdout;
    let tty = std::io::stdout().is_terminal();
    let mut stdout = std::io::stdout();
    if text && output.detail == Detail::Verbose {
        let _ = write!(stdout, "{}", text::plan_block(&session.report));
    }
    for (i, target) in plan.request.targets.iter().enumerate() {
        if i > 0 && !pause(plan.stop.delay, &stop) {
            break;
        }
        if text && output.detail != Detail::Quiet {
            let _ = writeln!(
                stdout,
                "{}{}",
                if i > 0 { "\n" } else { "" },
                text::run_banner(&session.report, &target.url)
            );
        }
        let log = text && output.detail != Detail::Quiet;
        let mut live = LiveView::new(log, text && tty, plan.stop.duration);
        if let Some(scenario) = &plan.request.scenario {
            live.step_names = scenario.stat_names.clone();
        }
        live.watching = plan.watch.monitor_pid.is_some();
        let start = RunStart {
            index: i,
            url: &target.url,
            plan: &plan,
            level: None,
        };
        let (run, result, aborted_by) = session.run_one(&start, target, &stop, &mut live)?;
        live.finish();
        session.sinks.run_finished(&run);
        if text {
            if output.detail == Detail::Quiet {
                let _ = writeln!(stdout, "{}", target.url);
            }
            let _ = write!(stdout, "{}", text::summary(&run, output.detail));
            let _ = write!(stdout, "{}", text::steps_table(&run));
        }
        if let Some(script) = &plan.request.script {
            // What `done()` prints follows the report, as under wrk.
            let _ = stdout.flush();
            if let Err(err) = script_done(script, &result) {
                eprintln!("error: done(): {err}");
            }
        }
        session.report.runs.push(run);
        if let Some(criterion) = aborted_by {
            if text {
                let _ = writeln!(
                    stdout,
                    "stopped early: threshold {criterion} failed (--abort-on-fail)"
                );
            }
            session.report.aborted_by = Some(criterion);
            break;
        }
        if result.interrupted {
            session.report.interrupted = true;
            break;
        }
    }
    session.finish(output, text, |runs| runs.iter().any(|r| r.summary.ok == 0))
}

/// Calls a script's `done()` with the run's figures as wrk gives them.
fn script_done(
    script: &crate::script::Script,
    result: &crate::engine::RunResult,
) -> Result<(), crate::script::ScriptError> {
    use crate::sample::ErrorKind;
    use crate::script::done::{Errors, Stats, Summary};
    let total = &result.total;
    let errors = |kinds: &[ErrorKind]| kinds.iter().map(|&k| total.errors[k as usize]).sum::<u64>();
    let summary = Summary {
        duration_us: result.elapsed.as_micros() as u64,
        requests: total.requests,
        bytes: total.bytes,
        errors: Errors {
            connect: errors(&[ErrorKind::Connect]),
            read: errors(&[
                ErrorKind::Reset,
                ErrorKind::Protocol,
                ErrorKind::Tls,
                ErrorKind::Io,
            ]),
            write: 0,
            status: total.status.iter().skip(400).sum(),
            timeout: errors(&[ErrorKind::Timeout]),
        },
    };
    // wrk's second statistics are each thread's requests per second,
    // sampled as it runs: here, each interval's rate per thread.
    let mut rates = crate::recorder::new_latency_histogram();
    let threads = result.threads.max(1) as f64;
    for row in &result.series {
        let _ = rates.record((row.rps / threads).round() as u64);
    }
    script.done(&summary, Stats(total.latency.hist.clone()), Stats(rates))
}

/// How long `--spawn` waits for the target to answer.
const SPAWN_WAIT: Duration = Duration::from_secs(10);

/// Starts the `--spawn` target (kept alive by the returned guard) and
/// watches it.
pub fn spawn_target(plan: &mut Plan) -> Result<Option<crate::monitor::Spawned>, RunError> {
    let Some(command) = &plan.watch.spawn else {
        return Ok(None);
    };
    let addr = plan.request.targets[0].addrs[0];
    let spawned = crate::monitor::Spawned::start(command, addr, SPAWN_WAIT)?;
    plan.watch.monitor_pid = Some(spawned.pid());
    Ok(Some(spawned))
}

/// Runs one target, stopping early if `--abort-on-fail` sees a threshold
/// break; returns the result and the criterion that stopped it.
pub fn run_watched(
    plan: &Plan,
    target: &crate::target::Target,
    stop: &Arc<AtomicBool>,
    live: &mut dyn crate::engine::Observer,
) -> Result<(crate::engine::RunResult, Option<String>), RunError> {
    if !plan.reporting.abort_on_fail {
        return Ok((engine::run(plan, target, stop.clone(), live)?, None));
    }
    let mut watch = crate::thresholds::AbortOnFail::new(live, &plan.reporting.thresholds, stop.clone());
    let result = engine::run(plan, target, stop.clone(), &mut watch)?;
    Ok((result, watch.failed.take()))
}

/// Checks the plan's `--threshold`s on the finished report and prints the
/// block.
pub fn finish_thresholds(report: &mut Report, text: bool) {
    let criteria = report.plan.reporting.thresholds.clone();
    judge(report, &criteria, text);
}

/// Checks `criteria` on a finished report (a run's, or `volley merge`'s
/// from saved shards) and, with `text`, prints their block.
pub fn judge<P>(report: &mut Report<P>, criteria: &[crate::slo::Criterion], text: bool) {
    if criteria.is_empty() {
        return;
    }
    report.thresholds = crate::thresholds::check(report, criteria);
    if text {
        print!("{}", crate::thresholds::render(&report.thresholds, criteria));
    }
}

/// Writes the JSON report where asked (a file, or stdout for `--json`) and
/// the HTML report; the same for a run's report and a merged one.
pub fn save<P: serde::Serialize>(report: &Report<P>, output: &Output) -> Result<(), SaveError> {
    if let Some(path) = &output.file {
        std::fs::write(path, report.to_json() + "\n").map_err(|source| SaveError {
            what: "report",
            path: path.display().to_string(),
            source,
        })?;
    }
    if output.json_stdout {
        println!("{}", report.to_json());
    }
    if let Some(path) = &output.html {
        std::fs::write(path, crate::report::html::render(report)).map_err(|source| SaveError {
            what: "the HTML report",
            path: path.display().to_string(),
            source,
        })?;
    }
    Ok(())
}

/// `--start-at`: counts down on stderr, then returns at the planned start
/// with the skew; a shard already later than its tolerance fails instead.
pub fn wait_for_start(
    start_at: &crate::plan::shard::StartAt,
    stop: &AtomicBool,
) -> Result<crate::report::StartInfo, RunError> {
    start_at.check_not_late(SystemTime::now())?;
    let tty = std::io::stderr().is_terminal();
    let mut last_shown = None;
    loop {
        let now = SystemTime::now();
        let Ok(left) = start_at.at.duration_since(now) else {
            break;
        };
        if stop.load(Ordering::Relaxed) {
            return Err(RunError::InterruptedBeforeStart);
        }
        let secs = left.as_secs();
        if last_shown != Some(secs) && (tty || last_shown.is_none()) {
            let line = format!(
                "{}starting at {} (in {}s){}",
                if tty { "\r" } else { "" },
                humantime::format_rfc3339_millis(start_at.at),
                secs + u64::from(left.subsec_nanos() > 0),
                if tty { "   " } else { "\n" }
            );
            // One write: in a pod, stderr and a `--stream -` on stdout share
            // one log file, and `eprint!` writes its pieces one by one, so
            // the stream's header (written meanwhile by its own thread)
            // could land inside this line and be lost to a follower.
            let _ = std::io::stderr().write_all(line.as_bytes());
            last_shown = Some(secs);
        }
        // Short sleeps near the end keep the start within a millisecond.
        std::thread::sleep(
            left.min(Duration::from_millis(if left > Duration::from_millis(50) {
                20
            } else {
                1
            })),
        );
    }
    if tty && last_shown.is_some() {
        eprintln!();
    }
    Ok(crate::report::StartInfo {
        planned_start: humantime::format_rfc3339_millis(start_at.at).to_string(),
        skew_ms: start_at.skew_ms(SystemTime::now()),
    })
}

/// Sleeps between URLs; returns false if Ctrl-C came meanwhile.
pub fn pause(delay: Duration, stop: &AtomicBool) -> bool {
    let until = std::time::Instant::now() + delay;
    while std::time::Instant::now() < until {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20).min(until - std::time::Instant::now()));
    }
    !stop.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::h3_note;

    #[test]
    fn the_http3_note_says_which_port_to_use() {
        assert_eq!(
            h3_note(8443, 8443),
            "note: the server offers HTTP/3 (Alt-Svc: h3 on UDP port 8443); --http3 would use it"
        );
        assert!(h3_note(443, 8443).ends_with("--http3 would use it with port 443 in the URL"));
    }
}
