//! Reads a drill-style benchmark file into a [`PlanFile`], checking every
//! key: anything volley does not support is an error naming the file, the
//! line and the key, never silently ignored.
//!
//! The YAML is walked as marked nodes (marked-yaml), so every value knows
//! its line; includes are read relative to the including file.

pub use super::defs::*;
use super::yaml;
use marked_yaml::Node;
use marked_yaml::types::{MarkedMappingNode, MarkedScalarNode};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Walks one file's nodes, knowing the file for error messages.
struct Reader<'a> {
    file: &'a Path,
    /// Where the file's anchored nodes start (see [`yaml::Document`]).
    anchored: &'a [usize],
}

fn line_of(node: &Node) -> usize {
    node.span().start().map_or(0, |m| m.line())
}

fn key_line(key: &MarkedScalarNode) -> usize {
    key.span().start().map_or(0, |m| m.line())
}

impl Reader<'_> {
    fn err(&self, line: usize, message: impl Into<String>) -> FileError {
        FileError {
            file: self.file.to_path_buf(),
            line,
            message: message.into(),
        }
    }

    fn mapping<'n>(&self, node: &'n Node, what: &str) -> Result<&'n MarkedMappingNode, FileError> {
        node.as_mapping()
            .ok_or_else(|| self.err(line_of(node), format!("'{what}' must be a mapping")))
    }

    fn string(&self, node: &Node, key: &str) -> Result<String, FileError> {
        match node {
            Node::Scalar(s) => Ok(s.as_str().to_string()),
            _ => Err(self.err(line_of(node), format!("'{key}' must be a single value"))),
        }
    }

    fn number<T: std::str::FromStr>(&self, node: &Node, key: &str) -> Result<T, FileError> {
        self.number_of(self.string(node, key)?, line_of(node), key)
    }

    fn number_of<T: std::str::FromStr>(&self, text: String, line: usize, key: &str) -> Result<T, FileError> {
        text.trim()
            .parse()
            .map_err(|_| self.err(line, format!("'{key}' must be a number, not '{text}'")))
    }

    /// A top-level value, with `{{ NAME }}` replaced by environment variable
    /// NAME as drill does (`iterations: '{{ ITERATIONS }}'`).
    fn setting(&self, node: &Node, key: &str) -> Result<String, FileError> {
        let text = self.string(node, key)?;
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(open) = rest.find("{{") {
            out.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            let close = after
                .find("}}")
                .ok_or_else(|| self.err(line_of(node), format!("unclosed '{{{{' in '{key}'")))?;
            let name = after[..close].trim();
            let value = std::env::var(name).map_err(|_| {
                self.err(
                    line_of(node),
                    format!("'{key}' uses '{{{{ {name} }}}}' but no environment variable has that name"),
                )
            })?;
            out.push_str(&value);
            rest = &after[close + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn boolean(&self, node: &Node, key: &str) -> Result<bool, FileError> {
        match self.string(node, key)?.trim() {
            "true" | "yes" | "on" => Ok(true),
            "false" | "no" | "off" => Ok(false),
            other => Err(self.err(
                line_of(node),
                format!("'{key}' must be true or false, not '{other}'"),
            )),
        }
    }

    /// Seconds (`3`, `1.5`) or a duration (`2s`, `500ms`).
    fn duration(&self, node: &Node, key: &str) -> Result<Duration, FileError> {
        self.duration_of(&self.string(node, key)?, line_of(node), key)
    }

    fn duration_of(&self, text: &str, line: usize, key: &str) -> Result<Duration, FileError> {
        let text = text.trim();
        if let Ok(secs) = text.parse::<f64>()
            && secs >= 0.0
            && let Ok(duration) = Duration::try_from_secs_f64(secs)
        {
            return Ok(duration);
        }
        humantime::parse_duration(text).map_err(|_| {
            self.err(
                line,
                format!("'{key}' must be seconds or a duration like 2s, not '{text}'"),
            )
        })
    }

    fn string_list(&self, node: &Node, key: &str) -> Result<Vec<String>, FileError> {
        match node {
            Node::Sequence(seq) => seq.iter().map(|n| self.string(n, key)).collect(),
            Node::Scalar(s) => Ok(vec![s.as_str().to_string()]),
            Node::Mapping(_) => Err(self.err(line_of(node), format!("'{key}' must be a list"))),
        }
    }

    /// Checks a mapping's keys against the ones allowed where it stands.
    fn only_keys(&self, map: &MarkedMappingNode, allowed: &[&str], place: &str) -> Result<(), FileError> {
        for key in map.keys() {
            if key.as_str() == "<<" {
                return Err(self.err(
                    key_line(key),
                    format!(
                        "merge keys ('<<') are not supported in {place} (drill does not merge them either): \
                         alias the whole value or write its keys out"
                    ),
                ));
            }
            if !allowed.contains(&key.as_str()) {
                return Err(self.err(
                    key_line(key),
                    format!(
                        "unsupported key '{}' in {place} (supported: {})",
                        key.as_str(),
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A body file: relative to the plan file, or (drill reads it from
    /// the working directory) to the working directory when only there.
    fn data_file(&self, path: &str) -> PathBuf {
        let beside = self.relative(path);
        if !beside.exists() && Path::new(path).exists() {
            return PathBuf::from(path);
        }
        beside
    }

    fn relative(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        if path.is_absolute() {
            return path.to_path_buf();
        }
        self.file.parent().unwrap_or(Path::new(".")).join(path)
    }

    /// Whether `node` is or holds an anchored node: a top-level key that
    /// only holds anchors for later aliases is allowed, whatever its name.
    fn holds_anchor(&self, node: &Node) -> bool {
        let span = node.span();
        let Some(start) = span.start().map(|m| m.character()) else {
            return false;
        };
        let end = span.end().map_or(start, |m| m.character());
        self.anchored.iter().any(|at| (start..=end).contains(at))
    }

    fn top(&self, root: &MarkedMappingNode) -> Result<PlanFile, FileError> {
        let mut known = root.clone();
        known.retain(|_, value| !self.holds_anchor(value));
        self.only_keys(
            &known,
            &[
                "base",
                "concurrency",
                "iterations",
                "rampup",
                "run_time",
                "success_codes",
                "new_conn_per_iter",
                "plan",
            ],
            "the benchmark file",
        )?;
        let mut plan = PlanFile::default();
        for (key, value) in root.iter() {
            match key.as_str() {
                "base" => plan.settings.base = Some(self.setting(value, "base")?),
                "concurrency" => {
                    let text = self.setting(value, "concurrency")?;
                    plan.settings.concurrency = Some(self.number_of(text, line_of(value), "concurrency")?)
                }
                "iterations" => {
                    let text = self.setting(value, "iterations")?;
                    plan.settings.iterations = Some(self.number_of(text, line_of(value), "iterations")?)
                }
                "rampup" => {
                    let text = self.setting(value, "rampup")?;
                    plan.settings.rampup = Some(self.duration_of(&text, line_of(value), "rampup")?)
                }
                "run_time" => {
                    let text = self.setting(value, "run_time")?;
                    plan.settings.run_time = Some(self.duration_of(&text, line_of(value), "run_time")?)
                }
                "success_codes" => {
                    let codes = self.string_list(value, "success_codes")?;
                    let parsed = codes
                        .iter()
                        .map(|c| c.trim().parse::<u16>().ok().filter(|c| (100..=599).contains(c)))
                        .collect::<Option<Vec<u16>>>()
                        .ok_or_else(|| {
                            self.err(line_of(value), "'success_codes' must list status codes like 200")
                        })?;
                    plan.settings.success_codes = Some(parsed);
                }
                "new_conn_per_iter" => {
                    plan.settings.new_conn_per_iter = Some(self.boolean(value, "new_conn_per_iter")?)
                }
                "plan" => {
                    let Node::Sequence(items) = value else {
                        return Err(self.err(line_of(value), "'plan' must be a list of items"));
                    };
                    for item in items.iter() {
                        plan.items.push(self.item(item)?);
                    }
                }
                // Keys that only hold anchors (checked above).
                _ => {}
            }
        }
        if !root.contains_key("plan") {
            return Err(self.err(
                line_of(&Node::Mapping(root.clone())),
                "the benchmark file has no 'plan'",
            ));
        }
        Ok(plan)
    }

    fn item(&self, node: &Node) -> Result<ItemDef, FileError> {
        let map = self.mapping(node, "plan item")?;
        let line = line_of(node);
        self.only_keys(
            map,
            &[
                "name",
                "request",
                "assign",
                "assert",
                "delay",
                "include",
                "exec",
                "tags",
                "with_items",
                "with_items_range",
                "with_items_from_csv",
                "with_items_from_file",
                "shuffle",
                "pick",
            ],
            "a plan item",
        )?;
        let name = match map.get_node("name") {
            Some(n) => self.string(n, "name")?,
            None => return Err(self.err(line, "a plan item needs a 'name'")),
        };
        let actions: Vec<&str> = ["request", "exec", "assert", "delay", "include"]
            .into_iter()
            .filter(|k| map.contains_key(*k))
            .collect();
        let assign_alone = map.contains_key("assign") && actions.is_empty();
        if actions.len() > 1 {
            return Err(self.err(
                line,
                format!(
                    "plan item '{name}' has both '{}' and '{}'",
                    actions[0], actions[1]
                ),
            ));
        }
        if map.contains_key("assign") && !assign_alone && !["request", "exec"].contains(&actions[0]) {
            return Err(self.err(
                line,
                format!("plan item '{name}': 'assign' goes with 'request' or 'exec', or stands alone"),
            ));
        }
        let action = match (actions.first(), assign_alone) {
            (Some(&"request"), _) => ActionDef::Request {
                request: self.request(map.get_node("request").expect("checked"), &name)?,
                assign: map
                    .get_node("assign")
                    .map(|n| self.string(n, "assign"))
                    .transpose()?,
            },
            (Some(&"exec"), _) => {
                let exec_node = map.get_node("exec").expect("checked");
                let exec = self.mapping(exec_node, "exec")?;
                self.only_keys(exec, &["command"], "'exec'")?;
                let command = exec
                    .get_node("command")
                    .ok_or_else(|| self.err(line_of(exec_node), "'exec' needs 'command'"))?;
                ActionDef::Exec {
                    command: self.string(command, "command")?,
                    assign: map
                        .get_node("assign")
                        .map(|n| self.string(n, "assign"))
                        .transpose()?,
                }
            }
            (Some(&"assert"), _) => {
                let (key, value) = self.key_value(map.get_node("assert").expect("checked"), "assert")?;
                ActionDef::Assert { key, value }
            }
            (Some(&"delay"), _) => {
                let delay = self.mapping(map.get_node("delay").expect("checked"), "delay")?;
                self.only_keys(delay, &["seconds"], "'delay'")?;
                let seconds = delay.get_node("seconds").ok_or_else(|| {
                    self.err(
                        line_of(map.get_node("delay").expect("checked")),
                        "'delay' needs 'seconds'",
                    )
                })?;
                ActionDef::Delay(self.duration(seconds, "seconds")?)
            }
            (Some(&"include"), _) => ActionDef::Include(
                self.relative(&self.string(map.get_node("include").expect("checked"), "include")?),
            ),
            (None, true) => {
                let (key, value) = self.key_value(map.get_node("assign").expect("checked"), "assign")?;
                ActionDef::Assign { key, value }
            }
            _ => {
                return Err(self.err(
                    line,
                    format!("plan item '{name}' does nothing: give it a 'request', 'exec', 'assign', 'assert', 'delay' or 'include'"),
                ));
            }
        };
        let items = self.items(map, &name)?;
        if items.is_some() && !matches!(action, ActionDef::Request { .. }) {
            return Err(self.err(
                line,
                format!("plan item '{name}': with_items goes with 'request'"),
            ));
        }
        let shuffle = map
            .get_node("shuffle")
            .map(|n| self.boolean(n, "shuffle"))
            .transpose()?
            .unwrap_or(false);
        let pick = map
            .get_node("pick")
            .map(|n| self.number::<usize>(n, "pick"))
            .transpose()?;
        if (shuffle || pick.is_some()) && items.is_none() {
            return Err(self.err(
                line,
                format!("plan item '{name}': 'shuffle' and 'pick' go with with_items"),
            ));
        }
        Ok(ItemDef {
            name,
            action,
            tags: map
                .get_node("tags")
                .map(|n| self.string_list(n, "tags"))
                .transpose()?
                .unwrap_or_default(),
            items,
            shuffle,
            pick,
            file: self.file.to_path_buf(),
            line,
            source: node.clone(),
        })
    }

    fn key_value(&self, node: &Node, what: &str) -> Result<(String, String), FileError> {
        let map = self.mapping(node, what)?;
        self.only_keys(map, &["key", "value"], &format!("'{what}'"))?;
        let get = |k: &str| {
            map.get_node(k)
                .ok_or_else(|| self.err(line_of(node), format!("'{what}' needs '{k}'")))
                .and_then(|n| self.string(n, k))
        };
        Ok((get("key")?, get("value")?))
    }

    fn request(&self, node: &Node, name: &str) -> Result<RequestDef, FileError> {
        let map = self.mapping(node, "request")?;
        self.only_keys(map, &["url", "method", "headers", "body"], "'request'")?;
        let url = match map.get_node("url") {
            Some(n) => self.string(n, "url")?,
            None => return Err(self.err(line_of(node), format!("the request of '{name}' needs a 'url'"))),
        };
        let method = map
            .get_node("method")
            .map(|n| self.string(n, "method"))
            .transpose()?
            .unwrap_or("GET".into());
        let method = method.trim().to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(self.err(
                line_of(map.get_node("method").unwrap_or(node)),
                format!("invalid method '{method}'"),
            ));
        }
        let mut headers = Vec::new();
        if let Some(h) = map.get_node("headers") {
            let hmap = self.mapping(h, "headers")?;
            for (k, v) in hmap.iter() {
                headers.push((k.as_str().to_string(), self.string(v, k.as_str())?));
            }
        }
        let body = match map.get_node("body") {
            None => None,
            Some(Node::Scalar(s)) => Some(BodyDef::Text(s.as_str().to_string())),
            Some(b @ Node::Mapping(bmap)) => {
                self.only_keys(bmap, &["file", "hex"], "'body'")?;
                match (bmap.get_node("file"), bmap.get_node("hex")) {
                    (Some(file), None) => Some(BodyDef::File(self.data_file(&self.string(file, "file")?))),
                    (None, Some(hex)) => Some(BodyDef::Bytes(
                        decode_hex(&self.string(hex, "hex")?)
                            .map_err(|e| self.err(line_of(hex), e.to_string()))?,
                    )),
                    _ => return Err(self.err(line_of(b), "'body' needs one of 'file', 'hex' or text")),
                }
            }
            Some(other) => {
                return Err(self.err(
                    line_of(other),
                    "'body' must be text, {file: PATH} or {hex: BYTES}",
                ));
            }
        };
        Ok(RequestDef {
            url,
            method,
            headers,
            body,
        })
    }

    fn items(&self, map: &MarkedMappingNode, name: &str) -> Result<Option<ItemsDef>, FileError> {
        let given: Vec<&str> = [
            "with_items",
            "with_items_range",
            "with_items_from_csv",
            "with_items_from_file",
        ]
        .into_iter()
        .filter(|k| map.contains_key(*k))
        .collect();
        if given.len() > 1 {
            return Err(self.err(
                key_line(map.keys().find(|k| k.as_str() == given[1]).expect("present")),
                format!("plan item '{name}' has both '{}' and '{}'", given[0], given[1]),
            ));
        }
        let Some(kind) = given.first() else {
            return Ok(None);
        };
        let node = map.get_node(kind).expect("present");
        Ok(Some(match *kind {
            "with_items" => {
                let Node::Sequence(seq) = node else {
                    return Err(self.err(line_of(node), "'with_items' must be a list"));
                };
                ItemsDef::List(seq.iter().map(to_json).collect())
            }
            "with_items_from_file" => ItemsDef::Lines(self.relative(&self.string(node, kind)?)),
            "with_items_range" => {
                let range = self.mapping(node, "with_items_range")?;
                self.only_keys(range, &["start", "step", "stop"], "'with_items_range'")?;
                let get = |k: &str, default: Option<i64>| match range.get_node(k) {
                    Some(n) => self.number::<i64>(n, k),
                    None => default
                        .ok_or_else(|| self.err(line_of(node), format!("'with_items_range' needs '{k}'"))),
                };
                let (start, step, stop) = (get("start", None)?, get("step", Some(1))?, get("stop", None)?);
                if step <= 0 || stop < start {
                    return Err(self.err(
                        line_of(node),
                        "'with_items_range' needs step > 0 and stop >= start",
                    ));
                }
                ItemsDef::Range { start, step, stop }
            }
            _ => match node {
                Node::Scalar(s) => ItemsDef::Csv {
                    file: self.relative(s.as_str()),
                    quote: b'"',
                },
                Node::Mapping(csv) => {
                    self.only_keys(csv, &["file_name", "quote_char"], "'with_items_from_csv'")?;
                    let file = csv
                        .get_node("file_name")
                        .ok_or_else(|| self.err(line_of(node), "'with_items_from_csv' needs 'file_name'"))?;
                    let quote = match csv.get_node("quote_char") {
                        Some(q) => {
                            let q = self.string(q, "quote_char")?;
                            // drill takes the first byte, so its `"\\'"` means `\`.
                            match q.as_bytes().first() {
                                Some(b) if b.is_ascii() => *b,
                                _ => {
                                    return Err(self.err(
                                        line_of(node),
                                        "'quote_char' must start with an ASCII character",
                                    ));
                                }
                            }
                        }
                        None => b'"',
                    };
                    ItemsDef::Csv {
                        file: self.relative(&self.string(file, "file_name")?),
                        quote,
                    }
                }
                Node::Sequence(_) => {
                    return Err(self.err(
                        line_of(node),
                        "'with_items_from_csv' must be a file or {file_name, quote_char}",
                    ));
                }
            },
        }))
    }
}

/// A YAML node as JSON, for items: numbers and booleans keep their type.
pub(crate) fn to_json(node: &Node) -> Value {
    match node {
        Node::Scalar(s) => {
            let text = s.as_str();
            if let Ok(n) = text.parse::<i64>() {
                Value::from(n)
            } else if let Ok(f) = text.parse::<f64>() {
                serde_json::Number::from_f64(f).map_or_else(|| Value::from(text), Value::Number)
            } else if text == "true" || text == "false" {
                Value::Bool(text == "true")
            } else {
                Value::from(text)
            }
        }
        Node::Sequence(seq) => Value::Array(seq.iter().map(to_json).collect()),
        Node::Mapping(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.as_str().to_string(), to_json(v)))
                .collect(),
        ),
    }
}

/// Reads and checks one plan file (includes are left to the caller).
pub fn read(path: &Path) -> Result<PlanFile, FileError> {
    let text = std::fs::read_to_string(path).map_err(|e| FileError {
        file: path.to_path_buf(),
        line: 0,
        message: format!("cannot read: {e}"),
    })?;
    parse(path, &text)
}

/// Parses plan file text; `path` names it in errors and anchors includes.
pub fn parse(path: &Path, text: &str) -> Result<PlanFile, FileError> {
    let doc = load_yaml(path, text)?;
    let reader = Reader {
        file: path,
        anchored: &doc.anchored,
    };
    let map = reader.mapping(&doc.root, "the benchmark file")?;
    reader.top(map)
}

/// Parses one YAML document as it is written (a leading `---`, comments,
/// a byte-order mark, CRLF line ends, anchors and aliases), so errors
/// carry its real lines.
fn load_yaml(path: &Path, text: &str) -> Result<yaml::Document, FileError> {
    yaml::parse(text).map_err(|e| FileError {
        file: path.to_path_buf(),
        line: e.line,
        message: format!("not valid YAML: {}", e.message),
    })
}

/// Reads an included file: a list of plan items.
pub fn read_included(path: &Path, from: &ItemDef) -> Result<Vec<ItemDef>, FileError> {
    let text = std::fs::read_to_string(path).map_err(|e| FileError {
        file: from.file.clone(),
        line: from.line,
        message: format!("cannot include '{}': {e}", path.display()),
    })?;
    let doc = load_yaml(path, &text)?;
    let reader = Reader {
        file: path,
        anchored: &doc.anchored,
    };
    let Node::Sequence(items) = &doc.root else {
        return Err(reader.err(
            line_of(&doc.root).max(1),
            "an included file must be a list of plan items",
        ));
    };
    items.iter().map(|n| reader.item(n)).collect()
}

/// Why a `body: {hex: ...}` is not bytes.
#[derive(Debug, thiserror::Error)]
enum HexError {
    #[error("'hex' has an odd number of digits ({0})")]
    OddLength(usize),
    #[error("'hex' has '{0}', which is not a hex byte")]
    NotAByte(String),
}

/// drill's `body: {hex: ...}`: pairs of hex digits (spaces between them,
/// as in drill's own documentation, are allowed).
fn decode_hex(text: &str) -> Result<Vec<u8>, HexError> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(HexError::OddLength(digits.len()));
    }
    digits
        .chunks(2)
        .map(|pair| {
            let pair = std::str::from_utf8(pair).unwrap_or("??");
            u8::from_str_radix(pair, 16).map_err(|_| HexError::NotAByte(pair.to_string()))
        })
        .collect()
}
