//! The manifests as YAML, the form Kubernetes users read and diff.
//!
//! Written here for JSON-shaped values (maps, lists, strings, numbers,
//! booleans, null) rather than taken from a YAML crate: the emitters at
//! hand write YAML 1.2 plain scalars that Kubernetes' YAML 1.1 readers take
//! for something else (`no` and `on` for booleans, `2026-11-23` for a date,
//! `1_000` for a number), and a pod's argument must stay a string. So a
//! string is written plain only when it starts with a letter, `/` or `$`,
//! holds no character YAML gives a meaning to, and is no YAML 1.1 boolean
//! or null; otherwise it is double-quoted with JSON's escapes, which YAML
//! reads the same. Multi-line text (a plan file in the ConfigMap) is a
//! literal block, kept line for line, when it has no character a block
//! cannot hold.

use serde_json::Value;
use std::fmt::Write;

/// One YAML document per object, each opened by `---`.
pub fn documents(objects: &[Value]) -> String {
    let mut out = String::new();
    for object in objects {
        out += "---\n";
        node(&mut out, object, 0);
    }
    out
}

/// Writes `value` at `indent` spaces, after whatever opened its line (a key
/// and colon, a `- `, or nothing), ending with a newline.
fn node(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    pad(out, indent);
                }
                scalar(out, key, indent, true);
                out.push(':');
                child(out, item, indent);
            }
        }
        Value::Array(list) if !list.is_empty() => {
            for (i, item) in list.iter().enumerate() {
                if i > 0 {
                    pad(out, indent);
                }
                out.push('-');
                // A map or list goes on the dash's line, the rest of it
                // under its first entry.
                if is_collection(item) {
                    out.push(' ');
                    node(out, item, indent + 2);
                } else {
                    child(out, item, indent);
                }
            }
        }
        Value::Object(_) => out.push_str("{}\n"),
        Value::Array(_) => out.push_str("[]\n"),
        Value::String(text) => {
            scalar(out, text, indent, false);
            out.push('\n');
        }
        other => {
            // Numbers, booleans and null: JSON's spelling is YAML's.
            let _ = writeln!(out, "{other}");
        }
    }
}

/// A map's value or a list's item, after its `key:` or `-`: a non-empty
/// map or list on the next lines, indented; anything else on this line.
fn child(out: &mut String, value: &Value, indent: usize) {
    if !is_collection(value) {
        out.push(' ');
        node(out, value, indent);
    } else if value.is_object() {
        out.push('\n');
        pad(out, indent + 2);
        node(out, value, indent + 2);
    } else {
        // Kubernetes' own style: a list's dashes under its key.
        out.push('\n');
        pad(out, indent);
        node(out, value, indent);
    }
}

/// A map or list with something in it (an empty one is written `{}` or `[]`).
fn is_collection(value: &Value) -> bool {
    match value {
        Value::Object(map) => !map.is_empty(),
        Value::Array(list) => !list.is_empty(),
        _ => false,
    }
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// A string as a plain scalar, a literal block (a value, not a key) or a
/// double-quoted one.
fn scalar(out: &mut String, text: &str, indent: usize, is_key: bool) {
    if is_plain(text) {
        out.push_str(text);
    } else if !is_key && text.contains('\n') && text.chars().all(|c| c == '\n' || kept_as_is(c)) {
        literal_block(out, text, indent);
    } else {
        double_quoted(out, text);
    }
}

/// Whether `text` reads back as the same string when written bare, in
/// YAML 1.1 and 1.2 alike.
fn is_plain(text: &str) -> bool {
    const BOOLEANS_AND_NULLS: [&str; 12] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf", "none",
    ];
    // A flag's dashes are fine before a letter (`-n`, `--json`), where no
    // reader sees a number or a list entry.
    let mut chars = text.trim_start_matches('-').chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || (c == '/' || c == '$') && !text.starts_with('-'))
        && chars.all(|c| c.is_ascii_alphanumeric() || "-_./$()=<>+%@,".contains(c))
        && !BOOLEANS_AND_NULLS.contains(&text.to_ascii_lowercase().as_str())
}

/// Whether `c` may stand in a scalar as it is: YAML's printable characters,
/// less the line and paragraph separators (line breaks to a YAML 1.1
/// reader) and the byte-order mark.
fn kept_as_is(c: char) -> bool {
    matches!(c, '\t' | '\x20'..='\x7e' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
        && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
}

/// `"..."` with JSON's escapes (YAML's double-quoted style reads them the
/// same), and `\u` for every character not kept as is.
fn double_quoted(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if kept_as_is(c) => out.push(c),
            c => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
        }
    }
    out.push('"');
}

/// `|` and the text's lines, two spaces in from `indent` (the column of the
/// key or dash it belongs to). The header gives that indentation when the
/// first line starts with a blank (the reader could not tell it from the
/// text), and how many final line breaks to keep: none (`-`), one, or all
/// (`+`).
fn literal_block(out: &mut String, text: &str, indent: usize) {
    out.push('|');
    if text.starts_with([' ', '\t', '\n']) {
        out.push('2');
    }
    let body = text.trim_end_matches('\n');
    let final_breaks = text.len() - body.len();
    match final_breaks {
        0 => out.push('-'),
        1 => {}
        _ => out.push('+'),
    }
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            pad(out, indent + 2);
            out.push_str(line);
        }
    }
    // The kept final line breaks beyond the first are empty lines.
    for _ in 1..final_breaks {
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use yaml_rust2::{Yaml, YamlLoader};

    /// A YAML value as JSON, to compare with what was written.
    fn as_json(yaml: &Yaml) -> Value {
        match yaml {
            Yaml::Hash(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.as_str().expect("string keys").to_string(), as_json(v)))
                    .collect(),
            ),
            Yaml::Array(list) => Value::Array(list.iter().map(as_json).collect()),
            Yaml::String(s) => json!(s),
            Yaml::Integer(n) => json!(n),
            Yaml::Real(r) => json!(r.parse::<f64>().unwrap()),
            Yaml::Boolean(b) => json!(b),
            Yaml::Null => Value::Null,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_manifest_reads_as_kubernetes_writes_them() {
        let object = json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": { "name": "load", "labels": { "volley.dev/run": "load" } },
            "spec": {
                "completions": 3,
                "template": { "spec": {
                    "containers": [{ "args": ["run", "-n", "300", "--start-at", "1970-01-01T00:00:30Z"], "name": "volley" }],
                    "volumes": [],
                    "resources": { "requests": {} },
                } },
            },
        });
        assert_eq!(
            documents(&[object]),
            "---
apiVersion: batch/v1
kind: Job
metadata:
  labels:
    volley.dev/run: load
  name: load
spec:
  completions: 3
  template:
    spec:
      containers:
      - args:
        - run
        - -n
        - \"300\"
        - --start-at
        - \"1970-01-01T00:00:30Z\"
        name: volley
      resources:
        requests: {}
      volumes: []
"
        );
    }

    #[test]
    fn every_string_reads_back_as_itself() {
        let words = [
            "no",
            "On",
            "Y",
            "~",
            "null",
            "NaN",
            ".inf",
            "2026-11-23",
            "1_000",
            "0b11",
            "0x1F",
            "1:20",
            "+1",
            "-",
            "- a",
            "a: b",
            "a #b",
            "#x",
            "$(VOLLEY_SECRET_0)",
            "p99<200ms",
            "*",
            "&a",
            "!t",
            "%x",
            "@x",
            "`x",
            "'",
            "\"",
            "",
            " lead",
            "trail ",
            "x\ty",
            "é ü",
            "\u{2028}",
            "[a]",
            "{a}",
            "a,b",
            "<<",
            "=",
            "?",
            "|",
            ">",
            "512Mi",
            "2",
            "plan.yml",
        ];
        let texts = [
            "base: x\nplan:\n  - a\n",
            "a\n\n",
            " lead\nx\n",
            "a\nb",
            "\n\nx\n",
            "x\n  \n",
            "x\n  ",
            "\ttab\nx",
            "crlf\r\nx\r\n",
            "a\n\n\n",
            "---\n...\n# c\n",
        ];
        let strings: Vec<Value> = words.iter().chain(&texts).map(|s| json!(s)).collect();
        let mut keyed = serde_json::Map::new();
        for (i, s) in words.iter().enumerate() {
            keyed.insert(s.to_string(), json!(i));
        }
        let object = json!({ "list": strings, "keys": keyed, "nested": [[1, "a"], [], {}, [{"a": ["b"]}]] });
        let written = documents(&[object.clone(), json!({"second": texts[1]})]);
        let read = YamlLoader::load_from_str(&written).unwrap_or_else(|e| panic!("{e}\n{written}"));
        assert_eq!(read.len(), 2, "{written}");
        assert_eq!(as_json(&read[0]), object, "{written}");
        assert_eq!(as_json(&read[1]), json!({"second": texts[1]}), "{written}");
        // The words a YAML 1.1 reader resolves are quoted; text stays lines.
        for word in ["no", "On", "2026-11-23", "1_000", "~", "512Mi"] {
            assert!(written.contains(&format!("- \"{word}\"\n")), "{word}: {written}");
        }
        assert!(
            written.contains("- |\n  base: x\n  plan:\n    - a\n"),
            "{written}"
        );
    }
}
