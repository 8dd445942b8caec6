//! `volley run`, `volley plan` (with its listings) and `volley step`: the
//! commands that send load from one machine.

use super::{CommandError, Outcome, check_outputs, check_writable, ended};
use crate::cli::{PlanArgs, RunArgs, StepArgs};
use crate::plan::Plan;
use crate::report::text::Detail;
use crate::run::{Output, execute};
use crate::sample::ErrorKind;
use crate::scenario::{TagFilter, list};
use crate::script::Script;
use crate::sink::SinkSpec;
use crate::sink::metrics::MetricsSpec;
use crate::step::StepPlan;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// `volley run`: every URL in turn; the run that got no answer is the one
/// named when nothing succeeded.
pub fn run(args: &RunArgs, stop: Arc<AtomicBool>) -> Result<Outcome, CommandError> {
    let mut plan = Plan::from_args(args).map_err(CommandError::usage)?;
    note_schemes(&plan);
    if let Some(path) = &args.script {
        load_script(&mut plan, path, &args.script_args, args.json)?;
    }
    let output = output_of(args)?;
    let (report, verdict) = execute(plan, &output, stop).map_err(CommandError::failed)?;
    // A script that failed stopped the run: it failed, rather than being
    // interrupted (its report, with the error's example, is out already).
    let script_failure = report
        .runs
        .iter()
        .find_map(|r| r.summary.error_examples.get(ErrorKind::Script.name()));
    if let Some(example) = script_failure {
        return Err(CommandError::failed(format!(
            "the script failed during the run: {example}"
        )));
    }
    let dead = report.runs.iter().find(|r| r.summary.ok == 0);
    ended(verdict, dead.map(|r| r.url.as_str()))
}

/// Loads the wrk script at `path` for `plan`'s one URL: its states made,
/// set up and initialised for the plan's threads; its request text's
/// depth is the run's pipelining. What is wrong with it is bad usage.
fn load_script(
    plan: &mut Plan,
    path: &std::path::Path,
    args: &[String],
    json_stdout: bool,
) -> Result<(), CommandError> {
    let [target] = &plan.request.targets[..] else {
        return Err(CommandError::usage("-s runs a script against one URL: give one"));
    };
    let source = Script::read(&path.display().to_string()).map_err(CommandError::usage)?;
    // The script's top level, `setup()` and `init()` run before the load,
    // bounded by the run's own length: a script that never returns there
    // is an error, not a hang (the thread running it ends with the
    // process; LuaJIT's compiled loops cannot be interrupted).
    let bound = plan.stop.duration.unwrap_or(plan.transport.timeout);
    let (target, headers, threads) = (target.clone(), plan.request.headers.clone(), plan.load.threads);
    let args = args.to_vec();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("volley-script-setup".into())
        .spawn(move || {
            let _ = tx.send(Script::load(
                source,
                &target,
                &headers,
                &args,
                threads,
                json_stdout,
            ));
        })
        .map_err(CommandError::failed)?;
    let script = match rx.recv_timeout(bound) {
        Ok(loaded) => loaded.map_err(CommandError::usage)?,
        Err(_) => {
            let message = format!(
                "the script did not finish its setup and init within {} (the run's length)",
                humantime::format_duration(bound)
            );
            return Err(CommandError::usage(message));
        }
    };
    plan.transport.pipeline = u32::try_from(script.pipeline).unwrap_or(u32::MAX);
    plan.request.script = Some(Arc::new(script));
    Ok(())
}

/// `volley plan FILE`: the plan file's scenario.
pub fn plan(args: &PlanArgs, stop: Arc<AtomicBool>) -> Result<Outcome, CommandError> {
    let plan = Plan::from_plan_args(args).map_err(CommandError::usage)?;
    let output = output_of(&args.run)?;
    let (report, verdict) = execute(plan, &output, stop).map_err(CommandError::failed)?;
    ended(verdict, report.runs.first().map(|r| r.url.as_str()))
}

/// `volley plan --list-tags` / `--list-tasks`: print, send nothing.
pub fn list(args: &PlanArgs) -> Result<Outcome, CommandError> {
    let listed = if args.list_tags {
        list::tags(&args.file)
    } else {
        let filter = TagFilter {
            tags: args.tags.clone(),
            skip_tags: args.skip_tags.clone(),
        };
        list::tasks(&args.file, &filter)
    };
    print!("{}", listed.map_err(CommandError::failed)?);
    Ok(Outcome::Written)
}

/// `volley step`: the levels, each an ordinary run, judged against the SLO.
pub fn step(args: &StepArgs, stop: Arc<AtomicBool>) -> Result<Outcome, CommandError> {
    let step = StepPlan::from_args(args).map_err(CommandError::usage)?;
    if let Some(plan) = step.plans.first() {
        note_schemes(plan);
    }
    let output = output_of(&args.run)?;
    let (report, verdict) = crate::step::execute(step, &output, stop).map_err(CommandError::failed)?;
    ended(verdict, report.runs.first().map(|r| r.url.as_str()))
}

/// A note on stderr for each URL given without a scheme, read as
/// `http://` (as curl reads it).
pub(super) fn note_schemes(plan: &Plan) {
    for note in plan.request.targets.iter().filter_map(|t| t.scheme_note()) {
        eprintln!("{note}");
    }
}

/// How the report is shown and saved, from the common run flags; a bad
/// metric flag, or a file to write that cannot be written, is bad usage.
pub(super) fn output_of(args: &RunArgs) -> Result<Output, CommandError> {
    check_outputs(args.output.as_deref(), args.html.as_deref())?;
    let stream = args
        .stream
        .as_deref()
        .map(crate::sink::stream::Destination::parse);
    if let Some(crate::sink::stream::Destination::File(path)) = &stream {
        check_writable("--stream", path)?;
    }
    let detail = if args.quiet {
        Detail::Quiet
    } else if args.verbose {
        Detail::Verbose
    } else {
        Detail::Normal
    };
    let metrics = MetricsSpec::parse(
        args.run_id.as_deref(),
        &args.metric_tags,
        &args.outputs,
        args.metrics_addr,
    )
    .map_err(CommandError::usage)?;
    Ok(Output {
        json_stdout: args.json,
        file: args.output.clone(),
        html: args.html.clone(),
        detail,
        sinks: SinkSpec {
            dashboard: args.dashboard,
            metrics,
            stream,
            // Set per run from its load model (`run::Session`).
            priority: Default::default(),
        },
    })
}
