//! The commands that send nothing and write files or text: `report`,
//! `compare`, `import`, `completions` and `man`.

use super::{CommandError, Outcome, Problem};
use crate::cli::{Cli, CompareArgs, CompletionsArgs, ImportArgs, ManArgs, ReportArgs};
use clap::CommandFactory;

/// `volley report`: a saved report as an HTML page.
pub fn report(args: &ReportArgs) -> Result<Outcome, CommandError> {
    let report = crate::report::SavedReport::load(&args.report).map_err(CommandError::usage)?;
    std::fs::write(&args.html, crate::report::html::render(&report))
        .map_err(|e| CommandError::failed(Problem::Write(args.html.display().to_string(), e)))?;
    Ok(Outcome::Written)
}

/// `volley compare`: a threshold failure when a `--fail-if` rule is broken
/// by a significant change.
pub fn compare(args: &CompareArgs) -> Result<Outcome, CommandError> {
    match crate::compare::command(args) {
        Ok(true) => Ok(Outcome::Completed),
        Ok(false) => Err(CommandError::ThresholdsFailed),
        Err(err) if err.is_usage() => Err(CommandError::usage(err)),
        Err(err) => Err(CommandError::failed(err)),
    }
}

/// `volley import`: the plan to `-o` or standard output, then one line on
/// stderr saying what was written; bad input is bad usage.
pub fn import(args: &ImportArgs) -> Result<Outcome, CommandError> {
    use crate::import::{ImportError, command};
    let summary = command(args, &mut std::io::stdout().lock()).map_err(|err| match err {
        ImportError::Input { .. } => CommandError::usage(err),
        ImportError::Write(_) => CommandError::failed(err),
    })?;
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
    if !summary.variables.is_empty() {
        eprintln!(
            "volley import: the plan reads these environment variables, set them before running it: {}",
            summary.variables.join(", ")
        );
    }
    if summary.notes > 1 {
        eprintln!("volley import: see the plan's header for what was left out and what to set");
    }
    Ok(Outcome::Written)
}

/// `volley completions SHELL`: the shell's completion script on stdout.
pub fn completions(args: &CompletionsArgs) -> Result<Outcome, CommandError> {
    clap_complete::generate(args.shell, &mut Cli::command(), "volley", &mut std::io::stdout());
    Ok(Outcome::Written)
}

/// `volley man DIR`: one man page per command.
pub fn man(args: &ManArgs) -> Result<Outcome, CommandError> {
    std::fs::create_dir_all(&args.dir)
        .and_then(|()| clap_mangen::generate_to(Cli::command(), &args.dir))
        .map_err(|e| CommandError::failed(Problem::ManPages(args.dir.display().to_string(), e)))?;
    Ok(Outcome::Written)
}
