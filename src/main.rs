//! The `volley` binary: parses the command line and maps outcomes to exit
//! codes (0 completed, 1 could not run or nothing succeeded, 2 bad usage,
//! 3 a threshold failed, 130 interrupted). Every failure is one line on stderr.

use clap::Parser;
use clap::error::ErrorKind as ClapErrorKind;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use volley::cli::{Cli, Command};
use volley::plan::Plan;
use volley::report::text::Detail;
use volley::run::{Output, Verdict, execute};

const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_THRESHOLDS: u8 = 3;
const EXIT_INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    let words: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(message) = value_after_a_bare_flag(&words) {
        return fail(EXIT_USAGE, &message);
    }
    let cli = match Cli::try_parse_from(&words) {
        Ok(cli) => cli,
        Err(err)
            if matches!(
                err.kind(),
                ClapErrorKind::DisplayHelp | ClapErrorKind::DisplayVersion
            ) =>
        {
            let _ = err.print();
            return ExitCode::SUCCESS;
        }
        Err(err) if err.kind() == ClapErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            return ExitCode::from(EXIT_USAGE);
        }
        Err(err) => {
            eprintln!("{} (see volley --help)", one_line(&err.render().to_string()));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let stop = install_interrupt_handler();
    match cli.command {
        Command::Run(args) => {
            let plan = match Plan::from_args(&args) {
                Ok(plan) => plan,
                Err(err) => return fail(EXIT_USAGE, &err.to_string()),
            };
            let output = match output_of(&args) {
                Ok(output) => output,
                Err(code) => return code,
            };
            match execute(plan, &output, stop) {
                Ok((report, verdict)) => exit_for(
                    verdict,
                    report
                        .runs
                        .iter()
                        .find(|r| r.summary.ok == 0)
                        .map(|r| r.url.as_str()),
                ),
                Err(err) => fail(EXIT_FAILED, &err.to_string()),
            }
        }
        Command::Plan(args) if args.list_tags || args.list_tasks => list_plan(&args),
        Command::Plan(args) => {
            let plan = match Plan::from_plan_args(&args) {
                Ok(plan) => plan,
                Err(err) => return fail(EXIT_USAGE, &err.to_string()),
            };
            let output = match output_of(&args.run) {
                Ok(output) => output,
                Err(code) => return code,
            };
            match execute(plan, &output, stop) {
                Ok((report, verdict)) => exit_for(verdict, report.runs.first().map(|r| r.url.as_str())),
                Err(err) => fail(EXIT_FAILED, &err.to_string()),
            }
        }
        Command::Compare(args) => compare(&args),
        Command::Report(args) => {
            let report = match volley::compare::read_report(&args.report) {
                Ok(report) => report,
                Err(e) => return fail(EXIT_USAGE, &e),
            };
            match std::fs::write(&args.html, volley::report::html::render(&report)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(
                    EXIT_FAILED,
                    &format!("cannot write '{}': {e}", args.html.display()),
                ),
            }
        }
        Command::Step(args) => {
            let step = match volley::step::StepPlan::from_args(&args) {
                Ok(step) => step,
                Err(err) => return fail(EXIT_USAGE, &err.to_string()),
            };
            let output = match output_of(&args.run) {
                Ok(output) => output,
                Err(code) => return code,
            };
            match volley::step::execute(step, &output, stop) {
                Ok((report, verdict)) => exit_for(verdict, report.runs.first().map(|r| r.url.as_str())),
                Err(err) => fail(EXIT_FAILED, &err.to_string()),
            }
        }
        Command::Serve(args) => {
            match volley::server::serve_forever(volley::server::ServerOptions {
                addr: args.addr,
                max_inflight: args.max_inflight,
                tls: args.tls,
                cert_out: args.cert_out,
                ..Default::default()
            }) {
                Ok(()) => ExitCode::SUCCESS,
                // Options the server refuses are bad usage, like a bad flag.
                Err(err) if err.kind() == std::io::ErrorKind::InvalidInput => {
                    fail(EXIT_USAGE, &err.to_string())
                }
                Err(err) => fail(EXIT_FAILED, &err.to_string()),
            }
        }
        Command::Merge(args) => merge(&args, &stop),
        Command::K8s(volley::cli::K8sCommand::Manifest(args)) => {
            match volley::k8s::build(&args.job, std::time::SystemTime::now()) {
                Ok(spec) => {
                    match args.output {
                        volley::cli::ManifestFormat::Yaml => print!("{}", volley::k8s::to_yaml(&spec)),
                        volley::cli::ManifestFormat::Json => print!("{}", volley::k8s::to_json(&spec)),
                    }
                    if let Some(credentials) = &spec.credentials {
                        eprintln!("note: {}", credentials.hint());
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(EXIT_USAGE, &e),
            }
        }
        Command::K8s(volley::cli::K8sCommand::Run(args)) => k8s_run(&args, &stop),
        Command::Import(args) => import(&args),
        Command::Demo(args) => match volley::demo::run(&args.duration, stop) {
            Ok(verdict) => exit_for(verdict, None),
            Err(err) => fail(EXIT_FAILED, &format!("{err:#}")),
        },
        Command::Completions(args) => {
            use clap::CommandFactory;
            clap_complete::generate(args.shell, &mut Cli::command(), "volley", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Man(args) => {
            use clap::CommandFactory;
            let written = std::fs::create_dir_all(&args.dir)
                .and_then(|()| clap_mangen::generate_to(Cli::command(), &args.dir));
            match written {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(
                    EXIT_FAILED,
                    &format!("cannot write the man pages into '{}': {e}", args.dir.display()),
                ),
            }
        }
    }
}

/// A flag whose value is optional takes it only after `=`
/// (`--dashboard=ADDR`), so that `--dashboard URL` keeps the URL a URL.
/// `--dashboard 127.0.0.1:5665 URL` would then serve on the default address
/// and fail on "127.0.0.1:5665" as a URL; this names the mistake instead,
/// for every such flag: the word after the bare flag is one its value
/// would take.
fn value_after_a_bare_flag(words: &[std::ffi::OsString]) -> Option<String> {
    use clap::CommandFactory;
    fn flags(command: &clap::Command, out: &mut Vec<clap::Arg>) {
        for arg in command.get_arguments() {
            let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
            if optional && arg.is_require_equals_set() && arg.get_long().is_some() {
                out.push(arg.clone());
            }
        }
        for sub in command.get_subcommands() {
            flags(sub, out);
        }
    }
    let mut optional = Vec::new();
    let mut root = Cli::command();
    root.build();
    flags(&root, &mut optional);
    let words: Vec<&std::ffi::OsStr> = words
        .iter()
        .skip(1)
        .map(|w| w.as_os_str())
        .take_while(|w| *w != "--")
        .collect();
    for pair in words.windows(2) {
        let Some(flag) = pair[0].to_str().and_then(|w| w.strip_prefix("--")) else {
            continue;
        };
        let value = pair[1];
        let taken = optional.iter().find(|arg| {
            // The word given to the flag's own value parser alone.
            let probe = clap::Arg::new("value").value_parser(arg.get_value_parser().clone());
            arg.get_long() == Some(flag)
                && clap::Command::new("probe")
                    .arg(probe)
                    .try_get_matches_from([std::ffi::OsStr::new("probe"), value])
                    .is_ok()
        });
        if let Some(arg) = taken {
            let name = arg
                .get_value_names()
                .and_then(|names| names.first())
                .map_or("VALUE".to_string(), |n| n.to_string());
            let value = value.to_string_lossy();
            return Some(format!(
                "--{flag} takes its value after '=', as --{flag}={name}: write --{flag}={value} (after a bare --{flag}, '{value}' is read as the next argument)"
            ));
        }
    }
    None
}

/// clap's message spans lines (the problem, then usage and a hint); the
/// lines before "Usage:" say what was wrong, folded into one.
fn one_line(rendered: &str) -> String {
    let message: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
        .collect();
    if message.is_empty() {
        "error: invalid usage".to_string()
    } else {
        message.join(" ")
    }
}

/// `volley compare`: exit 3 when a `--fail-if` rule is broken by a
/// significant change (see [`volley::compare::command`]).
fn compare(args: &volley::cli::CompareArgs) -> ExitCode {
    use volley::compare::{CompareError, command};
    match command(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(EXIT_THRESHOLDS),
        Err(CompareError::Usage(e)) => fail(EXIT_USAGE, &e),
        Err(CompareError::Write(e)) => fail(EXIT_FAILED, &e),
    }
}

/// `volley merge`: one report from the shards' reports; exit 3 when a
/// threshold fails on the merged run.
fn merge(args: &volley::cli::MergeArgs, stop: &AtomicBool) -> ExitCode {
    use volley::report::SavedReport;
    if args.follow {
        return merge_follow(args, stop);
    }
    if args.live.dashboard.is_some() || args.live.gone_after.is_some() || args.live.grace != "2s" {
        return fail(
            EXIT_USAGE,
            "--dashboard, --grace and --gone-after watch shards live: give them with --follow",
        );
    }
    let mut inputs = Vec::with_capacity(args.reports.len());
    for path in &args.reports {
        match SavedReport::load(path) {
            Ok(report) => inputs.push(volley::merge::Input {
                name: path.display().to_string(),
                report,
            }),
            Err(e) => return fail(EXIT_USAGE, &e.to_string()),
        }
    }
    let mut merged = match volley::merge::merge(&inputs, args.partial) {
        Ok(merged) => merged,
        Err(e) => return fail(EXIT_USAGE, &e),
    };
    let output = merge_output(args);
    let failed = match volley::merge::finish(&mut merged, &output) {
        Ok(failed) => failed,
        Err(e) => return fail(EXIT_USAGE, &e),
    };
    if failed {
        ExitCode::from(EXIT_THRESHOLDS)
    } else {
        ExitCode::SUCCESS
    }
}

/// `volley merge --follow`: the shards' streams merged live, then their
/// reports as `volley merge`; exit 1 when a shard failed or went away.
fn merge_follow(args: &volley::cli::MergeArgs, stop: &AtomicBool) -> ExitCode {
    let options = match follow_options(&args.live, args.partial, merge_output(args)) {
        Ok(options) => options,
        Err(e) => return fail(EXIT_USAGE, &e),
    };
    follow_exit(volley::follow::files::follow(&args.reports, &options, stop))
}

/// A live merge's exit: 3 when a threshold failed on the merged run, 2
/// for streams or flags that do not fit, 1 when a shard failed.
fn follow_exit(ended: Result<bool, volley::follow::FollowError>) -> ExitCode {
    use volley::follow::FollowError;
    match ended {
        Ok(true) => ExitCode::from(EXIT_THRESHOLDS),
        Ok(false) => ExitCode::SUCCESS,
        Err(FollowError::Input(e)) => fail(EXIT_USAGE, &e),
        Err(FollowError::Failed(e)) => fail(EXIT_FAILED, &e),
        Err(FollowError::Interrupted(e)) => fail(EXIT_INTERRUPTED, &e),
    }
}

fn merge_output(args: &volley::cli::MergeArgs) -> volley::merge::Output {
    volley::merge::Output {
        file: args.output.clone(),
        html: args.html.clone(),
        json: args.json,
        thresholds: args.thresholds.clone(),
    }
}

/// A live merge's settings from its flags.
fn follow_options(
    live: &volley::cli::LiveMergeArgs,
    partial: bool,
    output: volley::merge::Output,
) -> Result<volley::follow::Options, String> {
    let duration =
        |flag: &str, text: &str| volley::plan::parse_duration(flag, text).map_err(|e| e.to_string());
    Ok(volley::follow::Options {
        timing: volley::follow::Timing {
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

/// `volley k8s run`: the sharded run on Kubernetes, followed live and
/// merged; exit 1 when a shard failed, 3 when a threshold fails on the
/// merged run.
fn k8s_run(args: &volley::cli::K8sRunArgs, stop: &AtomicBool) -> ExitCode {
    let timeout = match volley::plan::parse_duration("--timeout", &args.timeout) {
        Ok(t) => t,
        Err(e) => return fail(EXIT_USAGE, &e.to_string()),
    };
    let spec = match volley::k8s::build(&args.job, std::time::SystemTime::now()) {
        Ok(spec) => spec,
        Err(e) => return fail(EXIT_USAGE, &e),
    };
    let output = volley::merge::Output {
        file: args.output.clone(),
        html: args.html.clone(),
        json: args.json,
        thresholds: args.thresholds.clone(),
    };
    let options = match follow_options(&args.live, false, output) {
        Ok(options) => options,
        Err(e) => return fail(EXIT_USAGE, &e),
    };
    let ran = volley::k8s::kubectl::run(&spec, &args.kubectl, timeout, args.keep, &options, stop);
    follow_exit(ran)
}

/// How the report is shown and saved, from the common run flags; a bad
/// metric flag is bad usage.
fn output_of(args: &volley::cli::RunArgs) -> Result<Output, ExitCode> {
    let detail = if args.quiet {
        Detail::Quiet
    } else if args.verbose {
        Detail::Verbose
    } else {
        Detail::Normal
    };
    let metrics = volley::sink::metrics::MetricsSpec::parse(
        args.run_id.as_deref(),
        &args.metric_tags,
        &args.outputs,
        args.metrics_addr,
    )
    .map_err(|e| fail(EXIT_USAGE, &e))?;
    Ok(Output {
        json_stdout: args.json,
        file: args.output.clone(),
        html: args.html.clone(),
        detail,
        sinks: volley::sink::SinkSpec {
            dashboard: args.dashboard,
            metrics,
            stream: args
                .stream
                .as_deref()
                .map(volley::sink::stream::Destination::parse),
            // Set per run from its load model (`run::Session`).
            priority: Default::default(),
        },
    })
}

fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}

fn exit_for(verdict: Verdict, dead_url: Option<&str>) -> ExitCode {
    match verdict {
        Verdict::Completed => ExitCode::SUCCESS,
        Verdict::NoSuccess => fail(
            EXIT_FAILED,
            &format!(
                "no request to {} succeeded (see the errors above)",
                dead_url.unwrap_or("the target")
            ),
        ),
        Verdict::Interrupted => ExitCode::from(EXIT_INTERRUPTED),
        Verdict::ThresholdsFailed => ExitCode::from(EXIT_THRESHOLDS),
    }
}

/// The first Ctrl-C asks the run to stop and report; a second one exits at
/// once, in case something does not stop.
fn install_interrupt_handler() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
    });
    stop
}

/// `volley import`: the plan to `-o` or standard output, then one line on
/// stderr saying what was written; bad input exits 2.
fn import(args: &volley::cli::ImportArgs) -> ExitCode {
    use volley::import::{ImportError, command};
    match command(args, &mut std::io::stdout().lock()) {
        Ok(summary) => {
            for (path, requests) in &summary.plans {
                if let Some(path) = path {
                    eprintln!("volley import: wrote {} ({requests} requests)", path.display());
                }
            }
            if summary.body_files > 0 {
                eprintln!(
                    "volley import: {} body file(s) beside the plan",
                    summary.body_files
                );
            }
            if summary.notes > 1 {
                eprintln!("volley import: see the plan's header for what was left out and what to set");
            }
            ExitCode::SUCCESS
        }
        Err(err @ ImportError::Input { .. }) => fail(EXIT_USAGE, &err.to_string()),
        Err(err @ ImportError::Write(_)) => fail(EXIT_FAILED, &err.to_string()),
    }
}

/// `volley plan --list-tags` / `--list-tasks`: print, send nothing.
fn list_plan(args: &volley::cli::PlanArgs) -> ExitCode {
    use volley::scenario::{TagFilter, list};
    let listed = if args.list_tags {
        list::tags(&args.file)
    } else {
        let filter = TagFilter {
            tags: args.tags.clone(),
            skip_tags: args.skip_tags.clone(),
        };
        list::tasks(&args.file, &filter)
    };
    match listed {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(EXIT_FAILED, &e.to_string()),
    }
}
