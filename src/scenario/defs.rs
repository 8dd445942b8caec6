//! What a plan file says, as written: the values [`file`](super::file)
//! reads out of the YAML, before includes are inlined and templates
//! compiled.

use marked_yaml::Node;
use serde_json::Value;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// A problem in a plan file, pointing at where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}

impl std::error::Error for FileError {}

/// The top-level settings of a plan file, as written (flags override them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub base: Option<String>,
    pub concurrency: Option<usize>,
    pub iterations: Option<u64>,
    /// Seconds over which the concurrency ramps up.
    pub rampup: Option<Duration>,
    pub run_time: Option<Duration>,
    pub success_codes: Option<Vec<u16>>,
    pub new_conn_per_iter: Option<bool>,
}

/// A plan file, as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanFile {
    pub settings: Settings,
    pub items: Vec<ItemDef>,
}

/// A body: inline text or a file read when the plan is loaded.
#[derive(Debug, Clone, PartialEq)]
pub enum BodyDef {
    Text(String),
    File(PathBuf),
    /// `hex:` bytes, decoded.
    Bytes(Vec<u8>),
}

/// A request of a plan item.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestDef {
    pub url: String,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<BodyDef>,
}

/// Where an item's `with_items*` values come from.
#[derive(Debug, Clone, PartialEq)]
pub enum ItemsDef {
    List(Vec<Value>),
    Range {
        start: i64,
        step: i64,
        stop: i64,
    },
    Csv {
        file: PathBuf,
        quote: u8,
    },
    /// `with_items_from_file`: each line of the file is an item.
    Lines(PathBuf),
}

/// What a plan item does.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionDef {
    Request {
        request: RequestDef,
        assign: Option<String>,
    },
    /// `assign: {key, value}` on its own.
    Assign {
        key: String,
        value: String,
    },
    Assert {
        key: String,
        value: String,
    },
    Delay(Duration),
    Include(PathBuf),
    /// `exec: {command}`: a shell command, its output optionally assigned.
    Exec {
        command: String,
        assign: Option<String>,
    },
}

/// One plan item, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemDef {
    pub name: String,
    pub action: ActionDef,
    pub tags: Vec<String>,
    pub items: Option<ItemsDef>,
    pub shuffle: bool,
    pub pick: Option<usize>,
    pub file: PathBuf,
    pub line: usize,
    /// The item as written (for `--list-tasks`).
    pub source: Node,
}
