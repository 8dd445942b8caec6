//! `volley import KIND FILE`: a plan file from what users already have, a
//! browser's HAR recording ([`har`]), an OpenAPI description ([`openapi`]),
//! curl command lines ([`curl`]) or a Postman collection ([`postman`]).
//!
//! Each format is read into the same [`plan::Plan`] (requests in order,
//! with a comment header saying where they came from and what was left
//! out); [`plan`] writes it as the YAML `volley plan` runs, and reads what
//! it wrote back through the plan reader to be sure it says the same. Only
//! when every plan and body file is ready are they written, under
//! temporary names renamed into place ([`output`]), so a bad input leaves
//! nothing half-written behind.

pub mod curl;
pub mod doc;
pub mod har;
pub mod openapi;
pub mod output;
pub mod plan;
pub mod postman;
pub mod request;
pub mod secret;
pub mod shell;

use crate::cli::{ImportArgs, ImportKind};
use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The largest input read (a HAR with its responses embedded can be big;
/// past this it is surely a mistake, and memory stays bounded).
const MAX_INPUT: u64 = 512 << 20;

/// A problem with the input, and where in it: a JSON pointer
/// (`/log/entries/3/request`), a line (`line 4`) or a command (`command 2`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub place: String,
    pub message: String,
    /// The file it is in, when not the one imported (a Postman `--env`).
    pub file: Option<String>,
}

impl Problem {
    pub fn at(place: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            place: place.into(),
            message: message.into(),
            file: None,
        }
    }

    /// A problem on a line of the input (`line 4`).
    pub fn on_line(line: usize, message: impl Into<String>) -> Problem {
        Problem::at(format!("line {line}"), message)
    }

    /// A problem with the command line rather than the input.
    pub fn usage(message: impl Into<String>) -> Problem {
        Problem::at("", message)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.place.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.place, self.message)
        }
    }
}

/// Why an import failed: one line naming the file and the place.
#[derive(Debug)]
pub enum ImportError {
    /// The input (or a flag) is wrong: exit 2.
    Input { file: String, problem: Problem },
    /// Writing the plan failed: exit 1.
    Write(output::WriteError),
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::Input { problem, .. } if problem.place.is_empty() && problem.file.is_none() => {
                write!(f, "{}", problem.message)
            }
            ImportError::Input { file, problem } => {
                write!(f, "{}: {problem}", problem.file.as_deref().unwrap_or(file))
            }
            // Its own line and causes, as if it stood alone.
            ImportError::Write(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ImportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ImportError::Input { .. } => None,
            ImportError::Write(e) => std::error::Error::source(e),
        }
    }
}

/// The input, read whole.
#[derive(Clone)]
pub struct Input {
    /// The file as named on the command line (`<stdin>` for `-`).
    pub name: String,
    pub text: String,
}

/// Options the formats share, checked from the flags.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--base`: its origin, and any path below it.
    pub base: Option<request::Base>,
    pub har: har::Options,
    pub openapi: openapi::Options,
    /// `--env`: a Postman environment, read.
    pub postman_env: Option<Input>,
    /// `--keep-secrets`: credentials written as recorded.
    pub keep_secrets: bool,
}

impl fmt::Debug for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Input({}, {} bytes)", self.name, self.text.len())
    }
}

/// What an import wrote, for the line printed after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Each plan written (`None`: standard output) and its request count.
    pub plans: Vec<(Option<PathBuf>, usize)>,
    /// Body files written beside the plans.
    pub body_files: usize,
    /// How many header notes (left out, skipped, to set) the plans carry.
    pub notes: usize,
    /// The environment variables the plans read, to set before running.
    pub variables: Vec<String>,
}

/// `volley import`: reads, converts, writes. The plan goes to `-o` or, when
/// none is given, to `stdout`.
pub fn command(args: &ImportArgs, stdout: &mut dyn std::io::Write) -> Result<Summary, ImportError> {
    let input_error = |file: &str| {
        let file = file.to_string();
        move |problem: Problem| ImportError::Input { file, problem }
    };
    let options = options(args).map_err(input_error(""))?;
    let input = read_input(&args.file).map_err(input_error(&args.file.display().to_string()))?;
    let plans = convert(args.kind, &input, &options).map_err(input_error(&input.name))?;
    if plans.len() > 1 && args.output.is_none() {
        return Err(ImportError::Input {
            file: input.name,
            problem: Problem::usage("--include-origin writes a plan per origin: give -o PLAN.yml"),
        });
    }
    let mut summary = output::write(&plans, args.output.as_deref(), stdout)?;
    for plan in &plans {
        for name in secret::referenced(plan) {
            if !summary.variables.contains(&name) {
                summary.variables.push(name);
            }
        }
    }
    Ok(summary)
}

/// Converts `input` into its plans: the main one first, then one per
/// `--include-origin`.
/// Unless `--keep-secrets`, the credentials they hold are references to
/// environment variables ([`secret`]).
pub fn convert(kind: ImportKind, input: &Input, options: &Options) -> Result<Vec<plan::Plan>, Problem> {
    let mut plans = match kind {
        ImportKind::Har => har::import(input, options)?,
        ImportKind::Openapi => vec![openapi::import(input, options)?],
        ImportKind::Curl => vec![curl::import(input, options)?],
        ImportKind::Postman => vec![postman::import(input, options)?],
    };
    if !options.keep_secrets {
        plans.iter_mut().for_each(secret::keep_out);
    }
    Ok(plans)
}

/// The flags, checked: each goes with its format only.
fn options(args: &ImportArgs) -> Result<Options, Problem> {
    let only = |given: bool, flag: &str, kind: ImportKind, name: &str| {
        if given && args.kind != kind {
            Err(Problem::usage(format!("{flag} goes with 'volley import {name}'")))
        } else {
            Ok(())
        }
    };
    only(
        !args.include_origin.is_empty(),
        "--include-origin",
        ImportKind::Har,
        "har",
    )?;
    only(args.include_assets, "--include-assets", ImportKind::Har, "har")?;
    only(args.keep_cookies, "--keep-cookies", ImportKind::Har, "har")?;
    only(args.think_time, "--think-time", ImportKind::Har, "har")?;
    only(!args.tags.is_empty(), "--tags", ImportKind::Openapi, "openapi")?;
    only(
        !args.operation.is_empty(),
        "--operation",
        ImportKind::Openapi,
        "openapi",
    )?;
    only(args.env.is_some(), "--env", ImportKind::Postman, "postman")?;
    let base = args
        .base
        .as_deref()
        .map(request::Base::parse)
        .transpose()
        .map_err(|e| Problem::usage(format!("--base: {e}")))?;
    let include_origin = args
        .include_origin
        .iter()
        .map(|o| request::origin_of(o).map_err(|e| Problem::usage(format!("--include-origin '{o}': {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let postman_env = match &args.env {
        Some(path) => Some(read_input(path).map_err(|mut p| {
            p.file = Some(path.display().to_string());
            p
        })?),
        None => None,
    };
    Ok(Options {
        base,
        har: har::Options {
            include_origin,
            include_assets: args.include_assets,
            keep_cookies: args.keep_cookies,
            think_time: args.think_time,
        },
        openapi: openapi::Options {
            tags: args.tags.clone(),
            operations: args.operation.clone(),
        },
        postman_env,
        keep_secrets: args.keep_secrets,
    })
}

/// Reads a file, or standard input for `-`, as UTF-8 text.
fn read_input(path: &Path) -> Result<Input, Problem> {
    let stdin = path.as_os_str() == "-";
    let name = if stdin {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    };
    let mut bytes = Vec::new();
    let read = if stdin {
        std::io::stdin().take(MAX_INPUT + 1).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MAX_INPUT + 1).read_to_end(&mut bytes))
    };
    let fail = |message: String| Problem {
        place: String::new(),
        message,
        file: Some(name.clone()),
    };
    read.map_err(|e| fail(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_INPUT {
        return Err(fail(format!("larger than {} MiB", MAX_INPUT >> 20)));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        fail(format!(
            "not UTF-8 text (byte {} is not): is this the right file?",
            e.utf8_error().valid_up_to()
        ))
    })?;
    Ok(Input {
        name,
        text: without_bom(text),
    })
}

/// The text without the UTF-8 byte-order mark some Windows tools put
/// first (it is no part of any format volley reads).
fn without_bom(text: String) -> String {
    match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    }
}
