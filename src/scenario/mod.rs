//! Scenario files: drill's benchmark format, run unchanged.
//!
//! [`file`](mod@file) reads and checks the YAML; this module resolves includes and
//! tags, expands `with_items*`, reads bodies and CSV files, and compiles
//! every `{{ ... }}` ([`template`]) into a [`Scenario`] ready to run: all
//! names resolved, all files read, before the first request.

pub mod defs;
pub mod exec;
pub mod file;
pub mod list;
pub mod state;
pub mod template;
pub mod yaml;

use crate::request::{Overrides, check_framing};
use file::{ActionDef, BodyDef, FileError, ItemDef, ItemsDef, PlanFile, Settings};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use template::{Names, Template, VarRef};

/// Includes nested deeper than this are taken for a cycle.
const MAX_INCLUDE_DEPTH: usize = 16;

/// A request step's compiled parts.
#[derive(Clone, Debug)]
pub struct RequestStep {
    pub method: String,
    /// Renders to a path (`/x`) or an absolute URL on the plan's origin.
    pub url: Template,
    pub headers: Vec<(String, Template)>,
    /// Which of volley's own headers the plan's headers replace.
    pub overrides: Overrides,
    pub body: Body,
    /// The variable slot the response is assigned to.
    pub assign: Option<usize>,
    pub items: Option<Items>,
}

/// A request body.
#[derive(Clone, Debug)]
pub enum Body {
    None,
    Template(Template),
    /// Read from a file at load time.
    Bytes(Vec<u8>),
}

/// Expanded `with_items` values and how to draw from them.
#[derive(Clone, Debug)]
pub struct Items {
    pub values: Vec<Value>,
    pub shuffle: bool,
    pub pick: Option<usize>,
}

/// What a step does.
#[derive(Clone, Debug)]
pub enum StepKind {
    Request(Box<RequestStep>),
    Assign {
        slot: usize,
        value: Template,
    },
    Assert {
        key: VarRef,
        expected: Template,
    },
    Delay(Duration),
    /// A shell command (`bash -c`); its trimmed output goes to `assign`.
    Exec {
        command: Template,
        assign: Option<usize>,
    },
}

/// One step of an iteration.
#[derive(Clone, Debug)]
pub struct Step {
    pub name: String,
    /// Index of this step's statistics (steps with the same name share).
    pub stat: usize,
    pub kind: StepKind,
}

/// A loaded, checked, compiled plan.
#[derive(Clone, Debug, Default)]
pub struct Scenario {
    pub file: PathBuf,
    /// The file's top-level settings (`base` replaced by `--base`).
    pub settings: Settings,
    pub steps: Vec<Step>,
    /// Names of the per-step statistics, in order of first appearance.
    pub stat_names: Vec<String>,
    /// How many variable slots an iteration needs.
    pub vars: usize,
    /// Variable names by slot (for messages).
    pub var_names: Vec<String>,
    /// What loading left out, as drill would (skipped CSV rows, items
    /// with no items): one line each, printed before the run.
    pub warnings: Vec<String>,
}

/// Which items to keep.
#[derive(Clone, Debug, Default)]
pub struct TagFilter {
    /// Keep only items with one of these tags (empty: all).
    pub tags: Vec<String>,
    /// Drop items with one of these tags.
    pub skip_tags: Vec<String>,
}

impl TagFilter {
    /// drill's rules (Ansible's): `--skip-tags` wins; an item tagged
    /// `never` runs only when `--tags` names `never`; one tagged `always`
    /// runs unless skipped; otherwise, with `--tags`, an item runs when it
    /// has one of them, and without `--tags` every item runs.
    pub fn keeps(&self, item: &ItemDef) -> bool {
        let has = |list: &[String]| item.tags.iter().any(|t| list.contains(t));
        let tagged = |tag: &str| item.tags.iter().any(|t| t == tag);
        if has(&self.skip_tags) {
            return false;
        }
        if !self.tags.is_empty() {
            if tagged("never") && !self.tags.iter().any(|t| t == "never") {
                return false;
            }
            if has(&self.tags) {
                return true;
            }
        }
        if tagged("always") {
            return true;
        }
        !tagged("never") && self.tags.is_empty()
    }

    /// A tag named by both `--tags` and `--skip-tags` is a mistake.
    fn check(&self, file: &Path) -> Result<(), FileError> {
        match self.tags.iter().find(|t| self.skip_tags.contains(t)) {
            Some(tag) => Err(FileError {
                file: file.to_path_buf(),
                line: 0,
                message: format!("'{tag}' is in both --tags and --skip-tags: keep it in one"),
            }),
            None => Ok(()),
        }
    }
}

fn at(item: &ItemDef, message: impl Into<String>) -> FileError {
    FileError {
        file: item.file.clone(),
        line: item.line,
        message: message.into(),
    }
}

/// Names known while compiling: variables assigned so far.
struct Known<'a> {
    vars: &'a [String],
    base: Option<&'a str>,
    items: bool,
}

impl Known<'_> {
    /// Runs `with` on the names `scenario` knows so far (its base without
    /// credentials; `items` where the step has `with_items`).
    fn of<T>(scenario: &Scenario, items: bool, with: impl FnOnce(&Known) -> T) -> T {
        let base = scenario
            .settings
            .base
            .as_deref()
            .map(crate::target::without_credentials);
        with(&Known {
            vars: &scenario.var_names,
            base: base.as_deref(),
            items,
        })
    }
}

impl Names for Known<'_> {
    fn var(&self, name: &str) -> Option<usize> {
        self.vars.iter().position(|v| v == name)
    }
    fn base(&self) -> Option<&str> {
        self.base
    }
    fn has_items(&self) -> bool {
        self.items
    }
}

/// Loads a plan file with its includes, keeping the items `filter` keeps;
/// `base` (from the command line) replaces the file's.
pub fn load(path: &Path, filter: &TagFilter, base: Option<&str>) -> Result<Scenario, FileError> {
    let mut plan = file::read(path)?;
    if let Some(base) = base {
        plan.settings.base = Some(base.to_string());
    }
    filter.check(path)?;
    let mut items = Vec::new();
    flatten(plan.items.clone(), &|item| filter.keeps(item), 0, &mut items)?;
    compile(path, &plan, items)
}

/// The items of a plan file with its includes inlined, those `keeps`
/// keeps: what `--list-tasks` and `--list-tags` show.
pub fn items(path: &Path, keeps: &dyn Fn(&ItemDef) -> bool) -> Result<Vec<ItemDef>, FileError> {
    let plan = file::read(path)?;
    let mut items = Vec::new();
    flatten(plan.items, keeps, 0, &mut items)?;
    Ok(items)
}

/// Inlines includes (depth-first, in place) and applies the tag filter.
fn flatten(
    items: Vec<ItemDef>,
    keeps: &dyn Fn(&ItemDef) -> bool,
    depth: usize,
    out: &mut Vec<ItemDef>,
) -> Result<(), FileError> {
    for item in items {
        if let ActionDef::Include(path) = &item.action {
            if depth >= MAX_INCLUDE_DEPTH {
                return Err(at(
                    &item,
                    format!("includes nested more than {MAX_INCLUDE_DEPTH} deep (a cycle?)"),
                ));
            }
            // An include's tags select the whole included file.
            if !keeps(&item) && !item.tags.is_empty() {
                continue;
            }
            let included = file::read_included(path, &item)?;
            flatten(included, keeps, depth + 1, out)?;
        } else if keeps(&item) {
            out.push(item);
        }
    }
    Ok(())
}

fn compile(path: &Path, plan: &PlanFile, items: Vec<ItemDef>) -> Result<Scenario, FileError> {
    let mut scenario = Scenario {
        file: path.to_path_buf(),
        settings: plan.settings.clone(),
        ..Scenario::default()
    };
    for item in items {
        let Some(kind) = compile_item(&item, &mut scenario)? else {
            continue;
        };
        let stat = match scenario.stat_names.iter().position(|n| *n == item.name) {
            Some(i) => i,
            None => {
                scenario.stat_names.push(item.name.clone());
                scenario.stat_names.len() - 1
            }
        };
        scenario.steps.push(Step {
            name: item.name.clone(),
            stat,
            kind,
        });
    }
    if scenario.steps.is_empty() {
        return Err(FileError {
            file: path.to_path_buf(),
            line: 0,
            message: "no plan item left to run (check --tags)".into(),
        });
    }
    scenario.vars = scenario.var_names.len();
    Ok(scenario)
}

/// The slot for variable `name`, new or reused.
fn slot_for(scenario: &mut Scenario, name: &str) -> usize {
    match scenario.var_names.iter().position(|v| v == name) {
        Some(slot) => slot,
        None => {
            scenario.var_names.push(name.to_string());
            scenario.var_names.len() - 1
        }
    }
}

/// An item's step; `None` for a request whose items came out empty (drill
/// sends nothing for it; a warning says so).
fn compile_item(item: &ItemDef, scenario: &mut Scenario) -> Result<Option<StepKind>, FileError> {
    let tpl = |text: &str, items: bool, scenario: &Scenario| {
        Known::of(scenario, items, |known| Template::compile(text, known))
            .map_err(|e| at(item, format!("in '{}': {e}", item.name)))
    };
    Ok(Some(match &item.action {
        ActionDef::Request { request, assign } => {
            let items = item
                .items
                .as_ref()
                .map(|def| expand_items(item, def, &mut scenario.warnings))
                .transpose()?;
            if items.as_ref().is_some_and(Vec::is_empty) {
                scenario.warnings.push(format!(
                    "{}:{}: '{}' has no items, so it sends nothing (as in drill)",
                    item.file.display(),
                    item.line,
                    item.name
                ));
                return Ok(None);
            }
            let has_items = items.is_some();
            let url = tpl(&request.url, has_items, scenario)?;
            let headers = request
                .headers
                .iter()
                .map(|(name, value)| Ok((name.clone(), tpl(value, has_items, scenario)?)))
                .collect::<Result<Vec<_>, FileError>>()?;
            let body = match &request.body {
                None => Body::None,
                Some(BodyDef::Text(text)) => Body::Template(tpl(text, has_items, scenario)?),
                Some(BodyDef::Bytes(bytes)) => Body::Bytes(bytes.clone()),
                Some(BodyDef::File(path)) => Body::Bytes(std::fs::read(path).map_err(|e| {
                    at(
                        item,
                        format!(
                            "cannot read the body file '{}' of '{}': {e}",
                            path.display(),
                            item.name
                        ),
                    )
                })?),
            };
            let static_body = match &body {
                Body::None => Some(&b""[..]),
                Body::Template(t) => t.as_static().map(str::as_bytes),
                Body::Bytes(bytes) => Some(&bytes[..]),
            };
            for (name, value) in &headers {
                check_framing(name, value.as_static(), static_body)
                    .map_err(|e| at(item, format!("in '{}': {e}", item.name)))?;
            }
            // The assignment takes effect after this request, so the
            // request's own templates cannot see it.
            let assign = assign.as_ref().map(|name| slot_for(scenario, name));
            let items = items.map(|values| Items {
                values,
                shuffle: item.shuffle,
                pick: item.pick,
            });
            StepKind::Request(Box::new(RequestStep {
                method: request.method.clone(),
                url,
                overrides: Overrides::of(request.headers.iter().map(|(n, _)| n.as_str())),
                headers,
                body,
                assign,
                items,
            }))
        }
        ActionDef::Assign { key, value } => {
            let value = tpl(value, false, scenario)?;
            StepKind::Assign {
                slot: slot_for(scenario, key),
                value,
            }
        }
        ActionDef::Assert { key, value } => {
            let key = match Known::of(scenario, false, |known| template::resolve(key, known)) {
                Ok(template::Resolved::Var(var)) => var,
                Ok(template::Resolved::Text(_)) => {
                    return Err(at(
                        item,
                        format!("assert key '{key}' must name an assigned value"),
                    ));
                }
                Err(e) => return Err(at(item, format!("in '{}': {e}", item.name))),
            };
            StepKind::Assert {
                key,
                expected: tpl(value, false, scenario)?,
            }
        }
        ActionDef::Delay(d) => StepKind::Delay(*d),
        ActionDef::Exec { command, assign } => {
            // Like a request's, the assignment is visible only after it.
            let command = tpl(command, false, scenario)?;
            StepKind::Exec {
                command,
                assign: assign.as_ref().map(|name| slot_for(scenario, name)),
            }
        }
        ActionDef::Include(_) => unreachable!("includes are inlined before compiling"),
    }))
}

fn expand_items(item: &ItemDef, def: &ItemsDef, warnings: &mut Vec<String>) -> Result<Vec<Value>, FileError> {
    let values = match def {
        ItemsDef::List(values) => values.clone(),
        ItemsDef::Range { start, step, stop } => {
            let count = (stop - start) / step + 1;
            if count > 10_000_000 {
                return Err(at(item, "with_items_range has more than 10,000,000 values"));
            }
            (0..count).map(|i| Value::from(start + i * step)).collect()
        }
        ItemsDef::Csv { file, quote } => read_csv(item, file, *quote, warnings)?,
        ItemsDef::Lines(file) => std::fs::read_to_string(file)
            .map_err(|e| {
                at(
                    item,
                    format!("cannot read the items file '{}': {e}", file.display()),
                )
            })?
            .lines()
            .map(Value::from)
            .collect(),
    };
    if values.is_empty() {
        return Ok(values);
    }
    if item.pick.is_some_and(|p| p == 0 || p > values.len()) {
        return Err(at(
            item,
            format!("'pick' must be between 1 and the {} items", values.len()),
        ));
    }
    Ok(values)
}

/// A CSV file with a header row: each row an object keyed by the headers.
/// A row the CSV reader refuses is skipped with a warning, as drill skips
/// it (its own example file has such rows).
fn read_csv(
    item: &ItemDef,
    path: &Path,
    quote: u8,
    warnings: &mut Vec<String>,
) -> Result<Vec<Value>, FileError> {
    let mut reader = csv::ReaderBuilder::new()
        .quote(quote)
        .from_path(path)
        .map_err(|e| {
            at(
                item,
                format!("cannot read the CSV file '{}': {e}", path.display()),
            )
        })?;
    let headers = reader
        .headers()
        .map_err(|e| at(item, format!("CSV file '{}': {e}", path.display())))?
        .clone();
    let mut rows = Vec::new();
    let (mut skipped, mut first_error) = (0, None);
    for record in reader.records() {
        match record {
            Ok(record) => rows.push(Value::Object(
                headers
                    .iter()
                    .zip(record.iter())
                    .map(|(h, v)| (h.to_string(), Value::from(v)))
                    .collect(),
            )),
            Err(e) => {
                skipped += 1;
                first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    if let Some(error) = first_error {
        warnings.push(format!(
            "{}:{}: CSV file '{}': {skipped} row(s) skipped, as drill skips them (first: {error})",
            item.file.display(),
            item.line,
            path.display()
        ));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests;
