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
