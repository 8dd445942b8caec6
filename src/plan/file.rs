//! `volley plan FILE.yml`: a plan file's settings merged into the spec as
//! typed values, where the flags leave them open (flags override the file).
//!
//! The file is read once ([`load_file`]); what it says about the load
//! (concurrency, iterations, run_time, rampup) is merged into a [`LoadAsk`]
//! by [`LoadAsk::with_file_settings`], a pure function, so a step level
//! derived later merges it again without reading the file again.

use super::spec::parse_urls;
use super::{LoadAsk, Plan, PlanError, RunSpec, StatusSet};
use crate::cli::{PlanArgs, RunArgs};
use crate::scenario::defs::Settings;
use crate::scenario::{self, Scenario, StepKind, TagFilter};
use crate::target::Target;

/// A plan file, loaded and checked against the flags.
pub struct LoadedFile {
    pub scenario: Scenario,
    /// The origin every request of the plan goes to (parsed, unresolved).
    pub targets: Vec<Target>,
}

/// Reads the plan file `args` names (printing its warnings) and checks
/// that the flags leave its requests to it.
pub fn load_file(args: &PlanArgs) -> Result<LoadedFile, PlanError> {
    let filter = TagFilter {
        tags: args.tags.clone(),
        skip_tags: args.skip_tags.clone(),
    };
    let scenario = scenario::load(&args.file, &filter, args.base.as_deref()).map_err(PlanError::Scenario)?;
    for warning in &scenario.warnings {
        eprintln!("warning: {warning}");
    }
    let run = &args.run;
    if !run.urls.is_empty() {
        return Err(PlanError::Conflict(
            "volley plan takes its URLs from the plan file ('base')",
        ));
    }
    if run.method != "GET" || !run.headers.is_empty() || run.body.is_some() || run.body_file.is_some() {
        return Err(PlanError::Conflict(
            "the plan file sets the requests: drop -m, -H, -b and --body-file",
        ));
    }
    if run.pipeline > 1 {
        return Err(PlanError::Conflict(
            "--pipeline does not go with a plan (its requests depend on each other)",
        ));
    }
    let origin = match &scenario.settings.base {
        Some(base) => base.clone(),
        // No base: take the origin of the first absolute URL.
        None => scenario
            .steps
            .iter()
            .find_map(|s| match &s.kind {
                StepKind::Request(r) => r.url.as_static().map(str::to_string),
                _ => None,
            })
            .and_then(|u| url::Url::parse(&u).ok())
            .map(|u| u.origin().ascii_serialization())
            .ok_or_else(|| PlanError::NoBase(args.file.clone()))?,
    };
    let targets = parse_urls(&[origin])?;
    Ok(LoadedFile { scenario, targets })
}

impl LoadAsk {
    /// A plan file's settings where this leaves them open: `concurrency`
    /// unless the connections are given (or are a closed ramp's stages);
    /// `iterations` and `run_time` unless a length is given (one iteration
    /// when the file gives none either); `rampup` (used by a closed model
    /// without stages).
    pub fn with_file_settings(mut self, settings: &Settings) -> LoadAsk {
        if self.connections.is_none() && (self.stages.is_none() || self.rate.is_some()) {
            self.connections = settings.concurrency;
        }
        if self.requests.is_none() && self.duration.is_none() && self.stages.is_none() {
            self.requests = settings.iterations;
            self.duration = settings.run_time;
            if self.requests.is_none() && self.duration.is_none() {
                self.requests = Some(1);
            }
        }
        self.rampup = settings.rampup;
        self
    }
}

impl RunSpec {
    /// Checks `volley plan`'s flags against its file.
    pub fn from_plan_args(args: &PlanArgs) -> Result<RunSpec, PlanError> {
        let file = load_file(args)?;
        RunSpec::from_plan_file(&args.run, file, LoadAsk::from_args(&args.run)?)
    }

    /// The spec of a loaded plan file with the flags `run` and the load
    /// `asked` (the flags', or a step level's): the file's settings fill
    /// what they leave open.
    pub fn from_plan_file(run: &RunArgs, file: LoadedFile, asked: LoadAsk) -> Result<RunSpec, PlanError> {
        let settings = &file.scenario.settings;
        let mut spec = RunSpec::new(run, file.targets, asked.with_file_settings(settings))?;
        if run.status.is_none()
            && let Some(codes) = &settings.success_codes
        {
            spec.request.success = StatusSet::of_codes(codes)?;
        }
        spec.request.scenario = Some(std::sync::Arc::new(file.scenario));
        Ok(spec)
    }
}

impl Plan {
    /// Resolves `volley plan`: the file's settings, overridden by flags.
    pub fn from_plan_args(args: &PlanArgs) -> Result<Plan, PlanError> {
        RunSpec::from_plan_args(args)?.resolve()
    }
}
