//! `volley script FILE.lua URL`: virtual users. The script's init runs
//! here first (a syntax error is bad usage), its `options` fill what the
//! flags leave open, `setup()` runs before the load (its failure stops the
//! run), the run goes as any other, and `teardown()` runs after it.

use super::run::{note_schemes, output_of};
use super::{CommandError, Outcome, ended};
use crate::cli::{RunArgs, ScriptArgs};
use crate::plan::Plan;
use crate::run::execute;
use crate::vu::{Options, Users, UsersError};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// How long the script's init and `setup()` may take before the load,
/// when the run gives no length to bound them by.
const SETUP_AT_MOST: Duration = Duration::from_secs(60);

/// `volley script`: the run of the script's VUs.
pub fn script(args: &ScriptArgs, stop: Arc<AtomicBool>) -> Result<Outcome, CommandError> {
    if args.run.script.is_some() {
        return Err(CommandError::usage(
            "-s takes a wrk script for volley run; volley script takes its script as its first argument",
        ));
    }
    if args.run.urls.len() != 1 {
        return Err(CommandError::usage(
            "give the URL the VUs send to after the script: volley script FILE.lua http://127.0.0.1:3000",
        ));
    }
    let path = args.file.display().to_string();
    let json_stdout = args.run.json;
    let mut users = bounded(SETUP_AT_MOST, "its init", move || Users::load(&path, json_stdout))?
        .map_err(CommandError::usage)?;
    let run_args = with_options(&args.run, &users.options);
    let mut plan = Plan::from_args(&run_args).map_err(CommandError::usage)?;
    note_schemes(&plan);
    let output = output_of(&run_args)?;
    let bound = plan.stop.duration.unwrap_or(SETUP_AT_MOST);
    users = bounded(bound, "setup()", move || users.setup().map(|()| users))?.map_err(|e| match e {
        UsersError::Setup(_) => CommandError::failed(e),
        other => CommandError::usage(other),
    })?;
    let users = Arc::new(users);
    plan.request.users = Some(users.clone());
    let (report, verdict) = execute(plan, &output, stop).map_err(CommandError::failed)?;
    if let Err(message) = users.teardown() {
        eprintln!("error: {message}");
    }
    ended(verdict, report.runs.first().map(|r| r.url.as_str()))
}

/// Runs `work` on a thread of its own for at most `bound`: a script that
/// never returns there is an error, not a hang (its thread ends with the
/// process; LuaJIT's compiled loops cannot be interrupted).
fn bounded<T: Send + 'static>(
    bound: Duration,
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, CommandError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("volley-script-setup".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(CommandError::failed)?;
    rx.recv_timeout(bound).map_err(|_| {
        CommandError::failed(format!(
            "the script did not finish {what} within {}",
            humantime::format_duration(bound)
        ))
    })
}

/// The flags with the script's options where they leave the load open (the
/// flags win, as k6's do); one VU and one iteration where neither says.
fn with_options(args: &RunArgs, options: &Options) -> RunArgs {
    let mut args = args.clone();
    if args.connections.is_none() && args.stages.is_none() {
        args.connections = options.vus;
    }
    let length_given = args.requests.is_some() || args.duration.is_some() || args.stages.is_some();
    if !length_given {
        args.requests = options.iterations;
        args.duration = options.duration.clone();
        if args.rate.is_none() {
            args.stages = options.stages.clone();
        }
        if args.requests.is_none() && args.duration.is_none() && args.stages.is_none() {
            args.requests = Some(1);
        }
    }
    if args.connections.is_none() && args.stages.is_none() {
        args.connections = Some(1);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(extra: &[&str]) -> RunArgs {
        let mut all = vec!["volley", "script", "s.lua", "http://127.0.0.1:1/"];
        all.extend(extra);
        match crate::cli::Cli::try_parse_from(all).unwrap().command {
            crate::cli::Command::Script(args) => args.run,
            _ => unreachable!(),
        }
    }

    #[test]
    fn flags_override_the_scripts_options() {
        let options = Options {
            vus: Some(4),
            duration: Some("3s".into()),
            iterations: None,
            stages: None,
        };
        let plain = with_options(&args(&[]), &options);
        assert_eq!(
            (plain.connections, plain.duration.as_deref()),
            (Some(4), Some("3s"))
        );
        let given = with_options(&args(&["--vus", "9", "--iterations", "20"]), &options);
        assert_eq!(
            (given.connections, given.requests, given.duration),
            (Some(9), Some(20), None)
        );
        let nothing = with_options(&args(&[]), &Options::default());
        assert_eq!((nothing.connections, nothing.requests), (Some(1), Some(1)));
        let staged = Options {
            stages: Some("1s:3,1s:0".into()),
            ..Options::default()
        };
        let ramp = with_options(&args(&[]), &staged);
        assert_eq!(
            (ramp.stages.as_deref(), ramp.connections),
            (Some("1s:3,1s:0"), None)
        );
    }
}
