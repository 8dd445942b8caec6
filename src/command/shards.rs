//! `volley merge` (and its live `--follow`) and `volley k8s`: the commands
//! that join shards' results into one report.

use super::{CommandError, Outcome, Problem, check_outputs};
use crate::cli::{K8sManifestArgs, K8sRunArgs, LiveMergeArgs, ManifestFormat, MergeArgs};
use crate::follow::FollowError;
use crate::plan::parse_duration;
use crate::report::SavedReport;
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

/// `volley merge`: one report from the shards' reports; a threshold failure
/// when one fails on the merged run.
pub fn merge(args: &MergeArgs, stop: &AtomicBool) -> Result<Outcome, CommandError> {
    check_outputs(args.output.as_deref(), args.html.as_deref())?;
    if args.follow {
        return merge_follow(args, stop);
    }
    if args.live.dashboard.is_some() || args.live.gone_after.is_some() || args.live.grace != "2s" {
        return Err(CommandError::usage(Problem::LiveWithoutFollow));
    }
    let mut inputs = Vec::with_capacity(args.reports.len());
    for path in &args.reports {
        inputs.push(crate::merge::Input {
            name: path.display().to_string(),
            report: SavedReport::load(path).map_err(CommandError::usage)?,
        });
    }
    let mut merged = crate::merge::merge(&inputs, args.partial).map_err(CommandError::usage)?;
    let output = merge_output(args);
    judged(crate::merge::finish(&mut merged, &output).map_err(CommandError::usage)?)
}

/// `volley merge --follow`: the shards' streams merged live, then their
/// reports as `volley merge`; a failure when a shard failed or went away.
fn merge_follow(args: &MergeArgs, stop: &AtomicBool) -> Result<Outcome, CommandError> {
    let options = follow_options(&args.live, args.partial, merge_output(args))?;
    followed(crate::follow::files::follow(&args.reports, &options, stop))
}

/// `volley k8s manifest`: the Job's manifest on stdout, a note on stderr
/// for the credentials it expects.
pub fn manifest(args: &K8sManifestArgs) -> Result<Outcome, CommandError> {
    let spec = crate::k8s::build(&args.job, SystemTime::now()).map_err(CommandError::usage)?;
    match args.output {
        ManifestFormat::Yaml => print!("{}", crate::k8s::to_yaml(&spec)),
        ManifestFormat::Json => print!("{}", crate::k8s::to_json(&spec)),
    }
    if let Some(credentials) = &spec.credentials {
        eprintln!("note: {}", credentials.hint());
    }
    Ok(Outcome::Written)
}

/// `volley k8s run`: the sharded run on Kubernetes, followed live and
/// merged; a failure when a shard failed, a threshold failure when one
/// fails on the merged run.
pub fn k8s_run(args: &K8sRunArgs, stop: &AtomicBool) -> Result<Outcome, CommandError> {
    let timeout = parse_duration("--timeout", &args.timeout).map_err(CommandError::usage)?;
    check_outputs(args.output.as_deref(), args.html.as_deref())?;
    let spec = crate::k8s::build(&args.job, SystemTime::now()).map_err(CommandError::usage)?;
    let output = crate::merge::Output {
        file: args.output.clone(),
        html: args.html.clone(),
        json: args.json,
        thresholds: args.thresholds.clone(),
    };
    let options = follow_options(&args.live, false, output)?;
    followed(crate::k8s::kubectl::run(
        &spec,
        &args.kubectl,
        timeout,
        args.keep,
        &options,
        stop,
    ))
}

/// A merged run's end: true when a threshold failed on it.
fn judged(failed: bool) -> Result<Outcome, CommandError> {
    if failed {
        Err(CommandError::ThresholdsFailed)
    } else {
        Ok(Outcome::Completed)
    }
}

/// A live merge's end: streams or flags that do not fit are bad usage, a
/// shard that failed is a failure.
fn followed(ended: Result<bool, FollowError>) -> Result<Outcome, CommandError> {
    match ended {
        Ok(failed) => judged(failed),
        Err(FollowError::Input(cause)) => Err(CommandError::Usage(cause)),
        Err(FollowError::Failed(cause)) => Err(CommandError::Failed(cause)),
        Err(err @ FollowError::Interrupted) => Err(CommandError::Interrupted(Some(err.into()))),
    }
}

fn merge_output(args: &MergeArgs) -> crate::merge::Output {
    crate::merge::Output {
        file: args.output.clone(),
        html: args.html.clone(),
        json: args.json,
        thresholds: args.thresholds.clone(),
    }
}

/// A live merge's settings from its flags.
fn follow_options(
    live: &LiveMergeArgs,
    partial: bool,
    output: crate::merge::Output,
) -> Result<crate::follow::Options, CommandError> {
    let duration = |flag: &str, text: &str| parse_duration(flag, text).map_err(CommandError::usage);
    Ok(crate::follow::Options {
        timing: crate::follow::Timing {
            grace: duration("--grace", &live.grace)?,
            gone_after: live
                .gone_after
                .as_deref()
                .map(|t| duration("--gone-after", t))
                .transpose()?,
        },
        partial,
        dashboard: live.dashboard,
        output,
    })
}
