//! `{{ ... }}` interpolation, compiled once when the plan is loaded.
//!
//! Every name is resolved at load time (an item, `index`, `iteration`,
//! `base`, a variable assigned by an earlier plan item, or an environment
//! variable, which is substituted right away), so rendering is a walk over
//! parts into a reused buffer, with no lookups by string.

use serde_json::Value;
use std::fmt::Write as _;

/// Where a variable's value comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// The current `with_items` value.
    Item,
    /// The current item's position (from 0).
    Index,
    /// The iteration's number (from 0).
    Iteration,
    /// A variable assigned by an earlier plan item, by slot.
    Var(usize),
}

/// A variable reference: its source and the path below it
/// (`foo.body.id` is `Var(foo)` with path `["body", "id"]`).
#[derive(Clone, Debug, PartialEq)]
pub struct VarRef {
    pub source: Source,
    pub path: Vec<String>,
    /// As written, for error messages.
    pub text: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Part {
    Text(String),
    Var(VarRef),
}

/// A compiled template.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
}

/// Why a template does not compile; the plan file's reader puts it beside
/// the item it is in.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("'{{{{ {0} }}}}' is not a variable reference")]
    NotAReference(String),
    #[error("'{{{{ base }}}}' is used but the file sets no 'base'")]
    NoBase,
    /// `hint` says when the name is one that only `with_items` gives.
    #[error(
        "'{{{{ {expr} }}}}': no earlier item assigns '{head}' and no environment variable has that name{hint}"
    )]
    Unknown {
        expr: String,
        head: String,
        hint: &'static str,
    },
    #[error("unclosed '{{{{' in '{0}'")]
    Unclosed(String),
}

/// Why a reference has no value at one moment of an iteration: the step
/// fails with this message.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("'{{{{ {0} }}}}' has no value")]
    NoValue(String),
    #[error("'{0}' is not assigned (its request failed?)")]
    NotAssigned(String),
    #[error("the body of '{0}' is not JSON")]
    BodyNotJson(String),
    #[error("'{0}': use .status, .body[.path] or .headers.name")]
    NotAResponsePart(String),
}

/// Resolves the first name of a reference at load time.
pub trait Names {
    /// The slot of a variable assigned by an earlier item.
    fn var(&self, name: &str) -> Option<usize>;
    /// The plan's base URL.
    fn base(&self) -> Option<&str>;
    /// Whether `with_items` values are in scope.
    fn has_items(&self) -> bool;
}

/// What a `{{ }}` stands for once its name is known.
#[derive(Debug, PartialEq)]
pub enum Resolved {
    /// A value of the iteration, rendered each time.
    Var(VarRef),
    /// Text fixed at load time: an environment variable's value, or `base`.
    Text(String),
}

/// Parses a reference like `foo.body.id` into a [`VarRef`], or the text an
/// environment variable or `base` stands for.
pub fn resolve(expr: &str, names: &dyn Names) -> Result<Resolved, CompileError> {
    let expr = expr.trim();
    let segments = path_segments(expr);
    // Names and path segments are words (JSON keys and header names may
    // hold '-'); braces or spaces mean the expression is not a reference.
    let word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    let Some((head, path)) = segments
        .as_deref()
        .and_then(|s| s.split_first())
        .filter(|(head, path)| word(head) && path.iter().all(|p| word(p)))
    else {
        return Err(CompileError::NotAReference(expr.to_string()));
    };
    let (head, path) = (head.as_str(), path.to_vec());
    let make = |source| {
        Ok(Resolved::Var(VarRef {
            source,
            path: path.clone(),
            text: expr.to_string(),
        }))
    };
    match head {
        "item" if names.has_items() => make(Source::Item),
        "index" if names.has_items() => make(Source::Index),
        "iteration" => make(Source::Iteration),
        "base" if path.is_empty() => match names.base() {
            Some(base) => Ok(Resolved::Text(base.to_string())),
            None => Err(CompileError::NoBase),
        },
        _ => {
            if let Some(slot) = names.var(head) {
                return make(Source::Var(slot));
            }
            if path.is_empty()
                && let Ok(value) = std::env::var(head)
            {
                return Ok(Resolved::Text(value));
            }
            let hint = if head == "item" || head == "index" {
                " (this item has no with_items)"
            } else {
                ""
            };
            Err(CompileError::Unknown {
                expr: expr.to_string(),
                head: head.to_string(),
                hint,
            })
        }
    }
}

/// The segments of a path written with dots, brackets or both, as drill
/// allows: `a.body[1].phones[0]` and `a.body.1.phones.0` are the same path;
/// a bracket may quote its key (`a["x-y"]`). `None` if brackets are unmatched.
pub fn path_segments(expr: &str) -> Option<Vec<String>> {
    let mut segments = Vec::new();
    let mut rest = expr;
    loop {
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let word = rest[..end].trim();
        // `a[1]` has no word between `a` and `[`; `a..b` and `a.` do.
        let after_bracket = rest.as_ptr() != expr.as_ptr() && word.is_empty() && rest.starts_with('[');
        if !after_bracket {
            segments.push(word.to_string());
        }
        rest = &rest[end..];
        if let Some(inner) = rest.strip_prefix('[') {
            let close = inner.find(']')?;
            let key = inner[..close].trim();
            let key = key
                .strip_prefix(['"', '\''])
                .and_then(|k| k.strip_suffix(['"', '\'']))
                .unwrap_or(key);
            segments.push(key.to_string());
            rest = &inner[close + 1..];
            if let Some(next) = rest.strip_prefix('.') {
                rest = next;
            } else if !rest.is_empty() && !rest.starts_with('[') {
                return None;
            }
            if rest.is_empty() {
                return Some(segments);
            }
        } else if let Some(next) = rest.strip_prefix('.') {
            rest = next;
        } else {
            return Some(segments);
        }
    }
}

impl Template {
    /// Compiles `text`; names are resolved through `names`.
    pub fn compile(text: &str, names: &dyn Names) -> Result<Template, CompileError> {
        let mut parts = Vec::new();
        let mut rest = text;
        let mut literal = String::new();
        while let Some(open) = rest.find("{{") {
            literal.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            let close = after
                .find("}}")
                .ok_or_else(|| CompileError::Unclosed(text.to_string()))?;
            match resolve(&after[..close], names)? {
                Resolved::Var(var) => {
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Var(var));
                }
                Resolved::Text(substituted) => literal.push_str(&substituted),
            }
            rest = &after[close + 2..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Template { parts })
    }

    /// The text, if the template has no variables.
    pub fn as_static(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [] => Some(""),
            [Part::Text(t)] => Some(t),
            _ => None,
        }
    }

    /// Renders into `out` (appending); a missing value is an error naming it.
    pub fn render(&self, scope: &dyn Scope, out: &mut Vec<u8>) -> Result<(), RenderError> {
        for part in &self.parts {
            match part {
                Part::Text(t) => out.extend_from_slice(t.as_bytes()),
                Part::Var(var) => scope.write(var, out)?,
            }
        }
        Ok(())
    }

    /// Renders to a new string (for values that are kept, not sent).
    pub fn render_string(&self, scope: &dyn Scope) -> Result<String, RenderError> {
        let mut out = Vec::new();
        self.render(scope, &mut out)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

/// The values of one moment of an iteration.
pub trait Scope {
    /// Appends the value of `var` to `out`.
    fn write(&self, var: &VarRef, out: &mut Vec<u8>) -> Result<(), RenderError>;
}

/// Follows `path` into a JSON value (object keys, array indices).
pub fn json_path<'v>(mut value: &'v Value, path: &[String]) -> Option<&'v Value> {
    for segment in path {
        value = match value {
            Value::Object(map) => map.get(segment)?,
            Value::Array(list) => list.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(value)
}

/// Writes a JSON value as text: strings bare, everything else as JSON.
pub fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::String(s) => out.extend_from_slice(s.as_bytes()),
        Value::Null => {}
        Value::Number(n) => {
            let mut s = String::new();
            let _ = write!(s, "{n}");
            out.extend_from_slice(s.as_bytes());
        }
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl Names for Fixed {
        fn var(&self, name: &str) -> Option<usize> {
            (name == "foo").then_some(0)
        }
        fn base(&self) -> Option<&str> {
            Some("http://127.0.0.1:1")
        }
        fn has_items(&self) -> bool {
            true
        }
    }

    struct Values(Value);
    impl Scope for Values {
        fn write(&self, var: &VarRef, out: &mut Vec<u8>) -> Result<(), RenderError> {
            let root = match var.source {
                Source::Var(0) => &self.0,
                Source::Item => &self.0["item"],
                Source::Iteration => {
                    out.extend_from_slice(b"7");
                    return Ok(());
                }
                _ => return Err(RenderError::NoValue(var.text.clone())),
            };
            let value = json_path(root, &var.path).ok_or_else(|| RenderError::NoValue(var.text.clone()))?;
            write_value(value, out);
            Ok(())
        }
    }

    #[test]
    fn compiles_and_renders() {
        // SAFETY: the test sets a variable no other test reads.
        unsafe { std::env::set_var("VOLLEY_TEMPLATE_TEST", "env-value") };
        let t = Template::compile(
            "{{ base }}/u/{{ foo.body.id }}?i={{iteration}}&e={{ VOLLEY_TEMPLATE_TEST }}&x={{ item.x }}",
            &Fixed,
        )
        .unwrap();
        assert_eq!(t.as_static(), None);
        let scope = Values(serde_json::json!({"body": {"id": 42}, "item": {"x": "y"}}));
        assert_eq!(
            t.render_string(&scope).unwrap(),
            "http://127.0.0.1:1/u/42?i=7&e=env-value&x=y"
        );
        assert_eq!(
            Template::compile("/plain", &Fixed).unwrap().as_static(),
            Some("/plain")
        );
    }

    #[test]
    fn rejects_unknown_names_and_syntax() {
        assert!(
            Template::compile("{{ nope.x }}", &Fixed)
                .unwrap_err()
                .to_string()
                .contains("no earlier item assigns 'nope'")
        );
        assert!(
            Template::compile("{{ foo", &Fixed)
                .unwrap_err()
                .to_string()
                .contains("unclosed")
        );
        assert!(Template::compile("{{ foo..x }}", &Fixed).is_err());
    }

    #[test]
    fn brackets_and_dots_name_the_same_path() {
        let dotted = path_segments("complex.body.1.phones.0").unwrap();
        assert_eq!(path_segments("complex.body[1].phones[0]").unwrap(), dotted);
        assert_eq!(path_segments("complex.body[1]phones[0]"), None);
        assert_eq!(path_segments("a[\"x-y\"][2]").unwrap(), ["a", "x-y", "2"]);
        assert_eq!(path_segments("a[1"), None);
        assert_eq!(path_segments("a..b").unwrap(), ["a", "", "b"]);
        let t = Template::compile("{{ foo.body[1].id }}", &Fixed).unwrap();
        let scope = Values(serde_json::json!({"body": [{"id": 1}, {"id": 2}]}));
        assert_eq!(t.render_string(&scope).unwrap(), "2");
    }

    #[test]
    fn json_paths_walk_objects_and_arrays() {
        let v = serde_json::json!({"users": [{"id": 1}, {"id": 2}]});
        let path: Vec<String> = ["users", "1", "id"].iter().map(|s| s.to_string()).collect();
        assert_eq!(json_path(&v, &path), Some(&serde_json::json!(2)));
        assert_eq!(json_path(&v, &["users".into(), "9".into()]), None);
    }
}
