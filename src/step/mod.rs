//! `volley step`: runs a series of load levels against one URL and answers
//! the five questions of a load test: responsiveness,
//! throughput, maximum load, tail latency and error handling.
//!
//! Each level is an ordinary run of the engine (closed: connections; open:
//! req/s); the levels' summaries and histograms go into the JSON report as
//! its runs, and the verdict is computed from them.

use crate::cli::StepArgs;
use crate::engine::Silent;
use crate::plan::{LoadAsk, Pace, Plan, PlanError, RunSpec, load_file, parse_duration};
use crate::report::live::LiveView;
use crate::report::text::{Detail, ms, ms_or_dash, thousands};
pub use crate::report::verdicts::{LevelRow, StepReport, Verdict5};
use crate::report::{Report, RunReport};
use crate::run::{Output, RunError, Session, Verdict, pause};
use crate::shape::Stage;
use crate::sink::RunStart;
use crate::slo::{Criterion, PercentSign, parse_criteria, parse_percent};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The resolved step plan.
#[derive(Clone, Debug)]
pub struct StepPlan {
    pub levels: Vec<f64>,
    pub rate_steps: bool,
    pub slo: Vec<Criterion>,
    pub stop_errors_pct: f64,
    pub cooldown: Duration,
    /// One plan per level, each derived from one base plan by value.
    pub plans: Vec<Plan>,
}

/// Why a step run's flags were refused: a usage problem, exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// One level's plan, as `volley run` would refuse it.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Flags that do not go together, or levels out of their bounds: the
    /// message says which, and what to do.
    #[error("{0}")]
    Usage(&'static str),
    #[error(
        "--factor {factor} from --from {from} to --to {to} takes over a million steps: raise --factor or lower --to"
    )]
    FactorSteps { factor: f64, from: f64, to: f64 },
    #[error("{0} levels: at most {MOST_LEVELS} (raise --factor, or narrow --from and --to)")]
    TooManyLevels(usize),
    /// The criteria parser's message.
    #[error("--slo: {0}")]
    Slo(String),
    #[error("invalid --stop-errors '{0}': use e.g. 50%")]
    StopErrors(String),
}

/// The most levels one step run takes: at the default 10 s a level, close
/// to three hours. More is a slip (a `--factor` a hair above 1, a `--to`
/// with a few zeros too many), and a list of millions of levels would take
/// gigabytes before the first one ran.
pub const MOST_LEVELS: usize = 1000;

/// The most multiplications [`geometric_levels`] makes, its rounded values
/// repeating or not: a factor a hair above 1 would otherwise spin for
/// minutes before anything ran.
const MOST_FACTOR_STEPS: f64 = 1e6;

/// Geometric levels from `from` to `to`, rounded, without repeats.
pub fn geometric_levels(from: f64, to: f64, factor: f64) -> Result<Vec<f64>, StepError> {
    if !(from > 0.0 && to >= from && to.is_finite() && factor > 1.0) {
        return Err(StepError::Usage(
            "use --from > 0, a finite --to >= --from and --factor > 1",
        ));
    }
    let steps = (to / from).ln() / factor.ln();
    if steps.is_nan() || steps > MOST_FACTOR_STEPS {
        return Err(StepError::FactorSteps { factor, from, to });
    }
    let mut levels = Vec::new();
    let mut level = from;
    while level <= to * (1.0 + 1e-9) {
        let rounded = level.round().max(1.0);
        if levels.last() != Some(&rounded) {
            levels.push(rounded);
        }
        level *= factor;
    }
    if levels.last().is_some_and(|l| *l < to) {
        levels.push(to.round());
    }
    Ok(levels)
}

impl StepPlan {
    pub fn from_args(args: &StepArgs) -> Result<StepPlan, StepError> {
        let run = &args.run;
        if args.plan.is_none() && run.urls.len() != 1 {
            return Err(StepError::Usage("volley step loads one URL (or --plan FILE)"));
        }
        if args.plan.is_some() && !run.urls.is_empty() {
            return Err(StepError::Usage("with --plan the URLs come from the plan file"));
        }
        if run.shard.is_some() || run.start_at.is_some() {
            // Each level's verdict needs the whole load's latencies at that
            // level; shards would judge slices, so step is not sharded.
            return Err(StepError::Usage(
                "volley step does not take --shard or --start-at: step one machine's load, or shard `volley run` at a fixed level",
            ));
        }
        if run.duration.is_some() || run.requests.is_some() || run.stages.is_some() || run.rate.is_some() {
            return Err(StepError::Usage(
                "volley step sets the load and length of each level: use --levels, --step-duration, --step-requests",
            ));
        }
        if args.rate_steps && run.connections.is_some_and(|c| c == 0) {
            return Err(StepError::Usage("--connections must be at least 1"));
        }
        if !args.rate_steps && run.connections.is_some() {
            return Err(StepError::Usage(
                "the levels are the connections: drop -c (or use --rate-steps)",
            ));
        }
        let levels = match (&args.levels, args.from, args.to) {
            (Some(levels), _, _) => levels.clone(),
            (None, Some(from), Some(to)) => geometric_levels(from, to, args.factor)?,
            _ => {
                return Err(StepError::Usage(
                    "give --levels 10,25,50 or --from 10 --to 2000 [--factor 1.5]",
                ));
            }
        };
        if levels.is_empty() || levels.iter().any(|l| !l.is_finite() || *l <= 0.0) {
            return Err(StepError::Usage("--levels must be positive numbers"));
        }
        if levels.len() > MOST_LEVELS {
            return Err(StepError::TooManyLevels(levels.len()));
        }
        if levels.windows(2).any(|w| w[1] <= w[0]) {
            return Err(StepError::Usage("--levels must rise, lightest first"));
        }
        let slo = parse_criteria(&args.slo).map_err(StepError::Slo)?;
        let stop_errors_pct = parse_percent(&args.stop_errors, PercentSign::Optional)
            .ok_or_else(|| StepError::StopErrors(args.stop_errors.clone()))?;
        let cooldown = parse_duration("--cooldown", &args.cooldown)?;
        let step_duration = parse_duration("--step-duration", &args.step_duration)?;
        let ramp = args
            .step_ramp
            .as_deref()
            .map(|r| parse_duration("--step-ramp", r))
            .transpose()?;
        if ramp.is_some_and(|r| r.is_zero()) {
            return Err(StepError::Usage(
                "--step-ramp must be longer than 0s (or leave it out)",
            ));
        }
        if ramp.is_some_and(|r| r >= step_duration) {
            return Err(StepError::Usage(
                "--step-ramp must be shorter than --step-duration",
            ));
        }
        if ramp.is_some() && run.warmup.is_some() {
            return Err(StepError::Usage("--warmup does not go with --step-ramp"));
        }
        // One base plan, resolved once (the plan file read once, DNS asked
        // once); every level is derived from it by value.
        let flags = LoadAsk::from_args(run)?;
        let level_load = |level: f64| {
            level_load(
                &flags,
                level,
                args.rate_steps,
                step_duration,
                ramp,
                args.step_requests,
            )
        };
        let first = level_load(levels[0]);
        let spec = match &args.plan {
            Some(file) => {
                let plan_args = crate::cli::PlanArgs {
                    file: file.clone(),
                    tags: Vec::new(),
                    skip_tags: Vec::new(),
                    base: None,
                    list_tags: false,
                    list_tasks: false,
                    run: run.clone(),
                };
                RunSpec::from_plan_file(run, load_file(&plan_args)?, first)?
            }
            None => RunSpec::from_args_with_load(run, first)?,
        };
        let base = spec.resolve()?;
        let plans = levels
            .iter()
            .map(|level| base.clone().with_load(level_load(*level)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StepPlan {
            levels,
            rate_steps: args.rate_steps,
            slo,
            stop_errors_pct,
            cooldown,
            plans,
        })
    }
}

/// The load and length of one level, from the flags' (threads, warm-up,
/// `--max-connections`, and the connections of a rate step).
fn level_load(
    flags: &LoadAsk,
    level: f64,
    rate_steps: bool,
    duration: Duration,
    ramp: Option<Duration>,
    requests: Option<u64>,
) -> LoadAsk {
    let mut load = flags.clone();
    match ramp {
        Some(ramp) => {
            // Up to the level over the ramp, then held: stages in req/s with
            // an open model's bare -R, else in connections.
            load.stages = Some(vec![
                Stage {
                    duration: ramp,
                    target: level,
                },
                Stage {
                    duration: duration - ramp,
                    target: level,
                },
            ]);
            load.rate = rate_steps.then_some(Pace::Staged);
        }
        None => {
            load.duration = Some(duration);
            if rate_steps {
                load.rate = Some(Pace::Rate(level));
            } else {
                load.connections = Some(level.round().max(1.0) as usize);
            }
        }
    }
    load.requests = requests;
    load
}

/// Runs every level and reports.
pub fn execute(
    mut step: StepPlan,
    output: &Output,
    stop: Arc<AtomicBool>,
) -> Result<(Report, Verdict), RunError> {
    let peak = step
        .plans
        .iter()
        .map(|p| p.load.max_connections.unwrap_or(p.load.connections))
        .max()
        .unwrap_or(1);
    let mut session = Session::start(&mut step.plans[0], output, peak)?;
    let watched = step.plans[0].watch.monitor_pid;
    for plan in &mut step.plans {
        plan.watch.monitor_pid = watched;
    }
    let text = !output.json_stdout;
    let tty = std::io::stdout().is_terminal();
    let unit = if step.rate_steps { "req/s" } else { "connections" };
    let url = step.plans[0].request.targets[0].url.clone();
    let mut stopped_early = false;
    if text {
        println!(
            "volley step {url}: {} levels of {unit}, SLO {}",
            step.levels.len(),
            slo_text(&step.slo)
        );
    }
    for (i, (level, plan)) in step.levels.iter().zip(&step.plans).enumerate() {
        if i > 0 && !pause(step.cooldown, &stop) {
            session.report.interrupted = true;
            break;
        }
        let start = RunStart {
            index: i,
            url: &url,
            plan,
            level: Some(*level),
        };
        let (run, result, aborted_by) = if text {
            let mut live = LiveView::new(output.detail == Detail::Verbose, tty, plan.stop.duration);
            live.watching = plan.watch.monitor_pid.is_some();
            let watched = session.run_one(&start, &plan.request.targets[0], &stop, &mut live)?;
            live.finish();
            watched
        } else {
            session.run_one(&start, &plan.request.targets[0], &stop, &mut Silent)?
        };
        session.sinks.run_finished(&run);
        let row = level_row(*level, &run, &step.slo);
        if text {
            println!(
                "  {} {unit}: {} requests, {} req/s, p50 {} ms, p99 {} ms, {:.2}% errors{}",
                format_load(*level),
                thousands(row.requests),
                thousands(row.rps.round() as u64),
                ms_or_dash(row.p50_ms, row.any_succeeded()),
                ms_or_dash(row.p99_ms, row.any_succeeded()),
                row.error_pct,
                if row.within_slo { "" } else { "  (outside the SLO)" }
            );
        }
        session.report.runs.push(run);
        if let Some(criterion) = aborted_by {
            session.report.aborted_by = Some(criterion);
            break;
        }
        if result.interrupted {
            session.report.interrupted = true;
            break;
        }
        if row.error_pct > step.stop_errors_pct {
            stopped_early = i + 1 < step.levels.len();
            break;
        }
    }
    let step_report = build(&session.report.runs, unit, &step.slo, stopped_early);
    if text {
        print!("\n{}", render(&step_report));
    }
    session.report.step = Some(step_report);
    // Levels past the knee may well fail entirely; only a target that never
    // answered is dead.
    session.finish(output, text, |runs| runs.iter().all(|r| r.summary.ok == 0))
}

fn slo_text(slo: &[Criterion]) -> String {
    slo.iter().map(|c| c.text.clone()).collect::<Vec<_>>().join(", ")
}

fn format_load(load: f64) -> String {
    if load.fract() == 0.0 {
        thousands(load as u64)
    } else {
        format!("{load:.1}")
    }
}

fn level_row(load: f64, run: &RunReport, slo: &[Criterion]) -> LevelRow {
    let s = &run.summary;
    LevelRow {
        load,
        requests: s.requests,
        rps: s.rps,
        p50_ms: s.latency_ms.p50,
        p99_ms: s.latency_ms.p99,
        error_pct: 100.0 * s.errors as f64 / s.requests.max(1) as f64,
        within_slo: s.requests > 0
            && slo.iter().all(|c| {
                c.holds(&crate::report::Finished {
                    summary: s,
                    histogram: Some(&run.histogram.0),
                })
            }),
    }
}

/// The table and the five criteria from the levels' runs.
pub fn build(runs: &[RunReport], unit: &'static str, slo: &[Criterion], stopped_early: bool) -> StepReport {
    let levels: Vec<LevelRow> = runs
        .iter()
        .map(|r| level_row(r.load.unwrap_or(0.0), r, slo))
        .collect();
    let max_index = levels.iter().take_while(|l| l.within_slo).count().checked_sub(1);
    let best = levels.iter().max_by(|a, b| a.rps.total_cmp(&b.rps));
    let past = max_index.map_or(0, |i| i + 1);
    let mut errors_past_max = BTreeMap::new();
    let mut failure_p50 = None;
    let mut failure_max: Option<f64> = None;
    for run in runs.iter().skip(past) {
        for (kind, n) in &run.summary.errors_by_kind {
            *errors_past_max.entry(kind.clone()).or_insert(0) += n;
        }
        if run.summary.errors > 0 {
            let f = &run.summary.failures_ms;
            failure_p50.get_or_insert(f.p50);
            failure_max = Some(failure_max.map_or(f.max, |m| m.max(f.max)));
        }
    }
    let at_max = max_index.map(|i| &runs[i].summary.latency_ms);
    let verdict = Verdict5 {
        responsiveness_p50_ms: levels.first().map_or(0.0, |l| l.p50_ms),
        lightest_load: levels.first().map_or(0.0, |l| l.load),
        best_rps: best.map_or(0.0, |l| l.rps),
        best_rps_load: best.map_or(0.0, |l| l.load),
        max_load: max_index.map(|i| levels[i].load),
        tail_p99_ms: at_max.map(|l| l.p99),
        tail_p999_ms: at_max.map(|l| l.p999),
        tail_max_ms: at_max.map(|l| l.max),
        failure_p50_ms_past_max: failure_p50,
        failure_max_ms_past_max: failure_max,
        errors_past_max,
        p99_past_max_ms: levels.get(past).map(|l| l.p99_ms),
        stopped_early,
    };
    StepReport {
        unit: unit.to_string(),
        slo: slo.iter().map(|c| c.text.clone()).collect(),
        levels,
        verdict,
    }
}

/// The step table and the verdict block.
pub fn render(step: &StepReport) -> String {
    let mut out = String::new();
    let unit = &step.unit;
    let _ = writeln!(
        out,
        "{:>14} {:>11} {:>11} {:>9} {:>9} {:>9}  SLO",
        format!("load ({unit})"),
        "requests",
        "req/s",
        "p50 ms",
        "p99 ms",
        "errors %"
    );
    for l in &step.levels {
        let _ = writeln!(
            out,
            "{:>14} {:>11} {:>11} {:>9} {:>9} {:>9.2}  {}",
            format_load(l.load),
            thousands(l.requests),
            thousands(l.rps.round() as u64),
            ms_or_dash(l.p50_ms, l.any_succeeded()),
            ms_or_dash(l.p99_ms, l.any_succeeded()),
            l.error_pct,
            if l.within_slo { "ok" } else { "broken" }
        );
    }
    let v = &step.verdict;
    let _ = writeln!(out, "\nverdict (SLO: {})", step.slo.join(", "));
    let _ = writeln!(
        out,
        "  responsiveness   p50 {} ms at the lightest load, {} {unit}",
        ms(v.responsiveness_p50_ms),
        format_load(v.lightest_load)
    );
    let _ = writeln!(
        out,
        "  throughput       best {} req/s, at {} {unit}",
        thousands(v.best_rps.round() as u64),
        format_load(v.best_rps_load)
    );
    match v.max_load {
        Some(max) => {
            let _ = writeln!(
                out,
                "  maximum load     {} {unit}: the highest level within the SLO",
                format_load(max)
            );
            let _ = writeln!(
                out,
                "  tail latency     at {} {unit}: p99 {} ms, p99.9 {} ms, max {} ms",
                format_load(max),
                ms(v.tail_p99_ms.unwrap_or(0.0)),
                ms(v.tail_p999_ms.unwrap_or(0.0)),
                ms(v.tail_max_ms.unwrap_or(0.0))
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  maximum load     none: even the lightest level broke the SLO"
            );
        }
    }
    let past = match (v.max_load, v.p99_past_max_ms) {
        (_, None) => "no level past the maximum was run".to_string(),
        (_, Some(p99)) if v.errors_past_max.is_empty() => {
            format!(
                "no errors past the maximum; latency grew instead (p99 {} ms at the next level)",
                ms(p99)
            )
        }
        (_, Some(p99)) => {
            let kinds: Vec<String> = v
                .errors_past_max
                .iter()
                .map(|(k, n)| format!("{k} {}", thousands(*n)))
                .collect();
            format!(
                "past the maximum: {}; failures came back in p50 {} ms, max {} ms (p99 {} ms at the next level)",
                kinds.join(", "),
                ms(v.failure_p50_ms_past_max.unwrap_or(0.0)),
                ms(v.failure_max_ms_past_max.unwrap_or(0.0)),
                ms(p99)
            )
        }
    };
    let _ = writeln!(out, "  error handling   {past}");
    if v.stopped_early {
        let _ = writeln!(out, "  (stopped early: a level's errors passed --stop-errors)");
    }
    out
}

#[cfg(test)]
mod tests;
