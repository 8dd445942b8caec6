//! The command layer: one function per subcommand, each ending in an
//! [`Outcome`] or a [`CommandError`] whose kind decides the exit code.
//!
//! The binary parses the command line and hands the [`Command`] to
//! [`execute`]; it then only maps the result to an exit code and prints
//! [`CommandError::line`]. Keeping the commands here, in the library, keeps
//! that mapping in one place, by the error's kind rather than by call site,
//! and lets the glue between modules (merge and Kubernetes, the metric and
//! follow flags, plan listings) be tested like the rest.

mod files;
mod run;
mod serve;
mod shards;
mod users;

use crate::cli::{Command, K8sCommand};
pub use crate::error::Cause;
use crate::run::Verdict;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// How a command that did what it was asked ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Load was sent (or shards merged, or reports compared) and every
    /// threshold and rule held.
    Completed,
    /// Nothing was sent: the command printed or wrote what was asked (a
    /// listing, a manifest, an imported plan, a page, completions).
    Written,
    /// The embedded target was served until it was stopped.
    Served,
}

/// Why a command did not end as asked; each kind is one exit code.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// Bad flags, or input that does not fit: nothing was sent.
    #[error(transparent)]
    Usage(Cause),
    /// The command could not run, or failed while running.
    #[error(transparent)]
    Failed(Cause),
    /// A run ended without a single successful request.
    #[error("no request to {url} succeeded (see the errors above)")]
    NothingSucceeded { url: String },
    /// A threshold, a `--fail-if` rule or an objective failed; the report
    /// says which.
    #[error("a threshold failed")]
    ThresholdsFailed,
    /// Ctrl-C. A run's report says so itself; a live merge says what it had.
    #[error("interrupted")]
    Interrupted(#[source] Option<Cause>),
}

/// What the commands find wrong themselves; the modules they call have
/// errors of their own.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("cannot write '{0}'")]
    Write(String, #[source] std::io::Error),
    #[error("cannot write the man pages into '{0}'")]
    ManPages(String, #[source] std::io::Error),
    #[error("--dashboard, --grace and --gone-after watch shards live: give them with --follow")]
    LiveWithoutFollow,
    #[error("{flag} '{path}' cannot be written")]
    Unwritable {
        flag: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl CommandError {
    /// A usage error from any cause.
    pub fn usage(cause: impl Into<Cause>) -> CommandError {
        CommandError::Usage(cause.into())
    }

    /// A failure to run from any cause.
    pub fn failed(cause: impl Into<Cause>) -> CommandError {
        CommandError::Failed(cause.into())
    }

    /// The one line shown for the error (without the `error: ` prefix): its
    /// chain of causes joined with ": ". `None` where the report already
    /// said it (a failed threshold, an interrupted run).
    pub fn line(&self) -> Option<String> {
        match self {
            CommandError::ThresholdsFailed | CommandError::Interrupted(None) => None,
            CommandError::Interrupted(Some(cause)) => Some(crate::error::line(cause.as_ref())),
            _ => Some(crate::error::line(self)),
        }
    }
}

/// Runs one subcommand. `stop` is set by Ctrl-C; commands that send load
/// or follow shards watch it.
pub fn execute(command: Command, stop: Arc<AtomicBool>) -> Result<Outcome, CommandError> {
    match command {
        Command::Run(args) => run::run(&args, stop),
        Command::Plan(args) if args.list_tags || args.list_tasks => run::list(&args),
        Command::Plan(args) => run::plan(&args, stop),
        Command::Step(args) => run::step(&args, stop),
        Command::Script(args) => users::script(&args, stop),
        Command::Report(args) => files::report(&args),
        Command::Compare(args) => files::compare(&args),
        Command::Import(args) => files::import(&args),
        Command::Completions(args) => files::completions(&args),
        Command::Man(args) => files::man(&args),
        Command::Merge(args) => shards::merge(&args, &stop),
        Command::K8s(K8sCommand::Manifest(args)) => shards::manifest(&args),
        Command::K8s(K8sCommand::Run(args)) => shards::k8s_run(&args, &stop),
        Command::Serve(args) => serve::serve(args),
        Command::Demo(args) => serve::demo(&args, stop),
    }
}

/// Checks, before any load, that the file `flag` names can be written, so
/// that a run does not end, maybe after an hour, without its report: a bad
/// path is bad usage. A file that is there is opened for writing and left
/// as it was; one that is not is created and removed again, so that no
/// empty file stays behind where none was. A FIFO or a device is left for
/// the writer to open (opening a FIFO would wait for its reader).
fn check_writable(flag: &'static str, path: &std::path::Path) -> Result<(), CommandError> {
    use std::fs::OpenOptions;
    let probe = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() || meta.is_dir() => OpenOptions::new().write(true).open(path).map(drop),
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            match OpenOptions::new().write(true).create_new(true).open(path) {
                Ok(file) => {
                    drop(file);
                    std::fs::remove_file(path)
                }
                // A dangling symbolic link: the writer creates what it names.
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                Err(err) => Err(err),
            }
        }
        Err(err) => Err(err),
    };
    probe.map_err(|source| {
        CommandError::usage(Problem::Unwritable {
            flag,
            path: path.display().to_string(),
            source,
        })
    })
}

/// Checks every report file a command will write at its end (`-o`,
/// `--html`) with [`check_writable`].
fn check_outputs(file: Option<&std::path::Path>, html: Option<&std::path::Path>) -> Result<(), CommandError> {
    if let Some(path) = file {
        check_writable("-o", path)?;
    }
    if let Some(path) = html {
        check_writable("--html", path)?;
    }
    Ok(())
}

/// How a run's verdict ends its command; `dead_url` names the target none
/// of whose requests succeeded.
fn ended(verdict: Verdict, dead_url: Option<&str>) -> Result<Outcome, CommandError> {
    match verdict {
        Verdict::Completed => Ok(Outcome::Completed),
        Verdict::NoSuccess => Err(CommandError::NothingSucceeded {
            url: dead_url.unwrap_or("the target").to_string(),
        }),
        Verdict::Interrupted => Err(CommandError::Interrupted(None)),
        Verdict::ThresholdsFailed => Err(CommandError::ThresholdsFailed),
    }
}

#[cfg(test)]
mod tests {
    use super::check_writable;

    #[test]
    fn a_writable_path_is_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.json");
        check_writable("-o", &new).unwrap();
        assert!(!new.exists(), "no empty file left where none was");
        let old = dir.path().join("old.json");
        std::fs::write(&old, "kept").unwrap();
        check_writable("-o", &old).unwrap();
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "kept");
    }

    #[test]
    fn a_missing_directory_or_a_directory_is_not_writable() {
        let dir = tempfile::tempdir().unwrap();
        for path in [dir.path().join("no/such.json"), dir.path().to_path_buf()] {
            let err = check_writable("--html", &path).unwrap_err();
            let line = err.line().unwrap();
            assert!(line.starts_with("--html '"), "{line}");
            assert!(line.contains("cannot be written: "), "{line}");
        }
    }
}
