//! `volley plan --list-tags` and `--list-tasks`: what a plan file holds,
//! printed the way drill prints it, without sending anything.
//!
//! Unlike drill, which reads only the top file, both look through the
//! includes too: `--tags` selects included items, so their tags belong in
//! the list. Each task is shown as the YAML it was written as, after a
//! comment naming its file and line.

use super::file::{FileError, ItemDef};
use super::{TagFilter, items};
use marked_yaml::Node;
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;

/// drill's label column.
const LABEL: usize = 15;

fn none_left(path: &Path) -> FileError {
    FileError {
        file: path.to_path_buf(),
        line: 0,
        message: "no plan item left (check --tags and --skip-tags)".into(),
    }
}

/// Every tag of every item (includes too), sorted: `Tags  ["a", "b"]`.
pub fn tags(path: &Path) -> Result<String, FileError> {
    let all = items(path, &|_| true)?;
    if all.is_empty() {
        return Err(none_left(path));
    }
    let tags: BTreeSet<&str> = all
        .iter()
        .flat_map(|i| i.tags.iter().map(String::as_str))
        .collect();
    let tags: Vec<&str> = tags.into_iter().collect();
    Ok(format!("\n{:LABEL$} {tags:?}\n", "Tags"))
}

/// The items `filter` keeps, each as YAML, after the filter itself.
pub fn tasks(path: &Path, filter: &TagFilter) -> Result<String, FileError> {
    filter.check(path)?;
    let kept = items(path, &|item| filter.keeps(item))?;
    if kept.is_empty() {
        return Err(none_left(path));
    }
    let mut out = String::from("\n");
    for (label, list) in [("Tags", &filter.tags), ("Skip-Tags", &filter.skip_tags)] {
        if !list.is_empty() {
            let mut sorted = list.clone();
            sorted.sort();
            let _ = writeln!(out, "{label:LABEL$} {sorted:?}");
        }
    }
    for item in &kept {
        out.push_str(&task(item));
        out.push('\n');
    }
    Ok(out)
}

fn task(item: &ItemDef) -> String {
    let mut out = format!("# {}:{}\n", item.file.display(), item.line);
    emit(&item.source, 0, &mut out);
    out
}

/// A scalar as YAML: plain when that reads back the same, else JSON's
/// double-quoted form (which YAML reads too).
fn scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && !text.starts_with(['-', '?', ' '])
        && !text.ends_with(' ')
        && text
            .chars()
            .all(|c| c.is_alphanumeric() || " _-./()+=;$~^".contains(c));
    if plain {
        text.to_string()
    } else {
        serde_json::Value::from(text).to_string()
    }
}

/// Block-style YAML of `node`, each line indented by `indent` spaces.
fn emit(node: &Node, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match node {
        Node::Scalar(s) => {
            let _ = writeln!(out, "{pad}{}", scalar(s.as_str()));
        }
        Node::Mapping(map) if map.is_empty() => {
            let _ = writeln!(out, "{pad}{{}}");
        }
        Node::Sequence(seq) if seq.is_empty() => {
            let _ = writeln!(out, "{pad}[]");
        }
        Node::Mapping(map) => {
            for (key, value) in map.iter() {
                let _ = write!(out, "{pad}{}:", scalar(key.as_str()));
                match value {
                    Node::Scalar(s) => {
                        let _ = writeln!(out, " {}", scalar(s.as_str()));
                    }
                    Node::Mapping(m) if m.is_empty() => out.push_str(" {}\n"),
                    Node::Sequence(s) if s.is_empty() => out.push_str(" []\n"),
                    Node::Mapping(_) => {
                        out.push('\n');
                        emit(value, indent + 2, out);
                    }
                    Node::Sequence(_) => {
                        out.push('\n');
                        emit(value, indent, out);
                    }
                }
            }
        }
        Node::Sequence(seq) => {
            for element in seq.iter() {
                // The element at one level deeper, its first indent made "- ".
                let mut inner = String::new();
                emit(element, indent + 2, &mut inner);
                let _ = write!(out, "{pad}- {}", &inner[indent + 2..]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emitted_yaml_reads_back_the_same() {
        let text = "name: 'Fetch {{ item }}'\nrequest:\n  url: /a b\n  headers: {X-Y: 'a: b', Empty: ''}\nwith_items: [1, [2, 3], {k: v}, []]\ntags: [a]\nmeta: {}\n";
        let node = marked_yaml::parse_yaml(0, text).unwrap();
        let mut out = String::new();
        emit(&node, 0, &mut out);
        let back = marked_yaml::parse_yaml(0, &out).unwrap();
        assert_eq!(
            super::super::file::to_json(&node),
            super::super::file::to_json(&back),
            "{out}"
        );
        assert!(out.contains("name: \"Fetch {{ item }}\"\n"), "{out}");
        assert!(
            out.contains("with_items:\n- 1\n- - 2\n  - 3\n- k: v\n- []\n"),
            "{out}"
        );
    }
}
