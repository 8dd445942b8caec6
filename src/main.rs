//! The `volley` binary: parses the command line, runs the command
//! (`volley::command`) and maps how it ended to an exit code (0 completed,
//! 1 could not run or nothing succeeded, 2 bad usage, 3 a threshold failed,
//! 130 interrupted). Every failure is one line on stderr.

use clap::Parser;
use clap::error::ErrorKind as ClapErrorKind;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use volley::cli::Cli;
use volley::command::{CommandError, Outcome, execute};

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
    match execute(cli.command, stop) {
        Ok(Outcome::Completed | Outcome::Written | Outcome::Served) => ExitCode::SUCCESS,
        Err(err) => {
            if let Some(line) = err.line() {
                eprintln!("error: {line}");
            }
            ExitCode::from(exit_code(&err))
        }
    }
}

/// Each kind of error is one exit code.
fn exit_code(err: &CommandError) -> u8 {
    match err {
        CommandError::Usage(_) => EXIT_USAGE,
        CommandError::Failed(_) | CommandError::NothingSucceeded { .. } => EXIT_FAILED,
        CommandError::ThresholdsFailed => EXIT_THRESHOLDS,
        CommandError::Interrupted(_) => EXIT_INTERRUPTED,
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

fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
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
