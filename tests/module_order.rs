//! The modules stack one way (ARCHITECTURE.md): this test reads every file
//! under `src/`, collects the `crate::` and `super::` paths its non-test code
//! names, and fails on any import cycle, so the order cannot regress.
//!
//! Two modules are compared in the namespace they share: `engine::connection`
//! naming `engine::iteration` is an edge between the siblings `connection` and
//! `iteration` inside `engine`; `plan` naming `engine::Protocol` is an edge
//! between `plan` and `engine` at the top. A parent and its own children are
//! never an edge (a `mod.rs` re-exports and drives its children by design).
//! Test code (`#[cfg(test)] mod ...` blocks and `tests.rs` files) may look
//! anywhere and is skipped. Written by hand (a few dozen lines of scanning)
//! rather than pulling a Rust parser into the build for one check.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

type ModPath = Vec<String>;

/// Every source file under `src/` with its module path (`src/engine/mod.rs`
/// is `engine`, `src/sink/dashboard/server.rs` is `sink::dashboard::server`).
fn source_files() -> Vec<(ModPath, String)> {
    fn walk(dir: &Path, out: &mut Vec<(ModPath, String)>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix("src").unwrap();
                let mut parts: ModPath = rel
                    .iter()
                    .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                    .collect();
                if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                    parts.pop();
                }
                if parts == ["main"] || parts.iter().any(|p| p == "tests") {
                    continue; // the binary sits on top of everything; tests may look anywhere
                }
                out.push((parts, fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new("src"), &mut out);
    out
}

/// The file's text without comments and without `#[cfg(test)]` modules.
fn code_only(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]")
            && lines.peek().is_some_and(|l| l.trim_start().starts_with("mod "))
        {
            let mut depth = 0i32;
            let mut opened = false;
            for l in lines.by_ref() {
                depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
                opened |= l.contains('{');
                if l.trim_end().ends_with(';') && !opened || opened && depth <= 0 {
                    break;
                }
            }
            continue;
        }
        let code = line.find(" // ").map_or(line, |at| &line[..at]);
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Every path named from `crate::` or `super::`, braces expanded:
/// `use crate::{a::B, c::{d, e}}` gives `a::B`, `c::d`, `c::e`.
fn named_paths(code: &str, me: &ModPath) -> Vec<ModPath> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let word_start = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let rest = &code[i..];
        if word_start && (rest.starts_with("crate::") || rest.starts_with("super::")) {
            let mut base: ModPath = Vec::new();
            let mut j = i;
            if rest.starts_with("crate::") {
                j += "crate::".len();
            } else {
                base = me.clone();
                while code[j..].starts_with("super::") {
                    base.pop();
                    j += "super::".len();
                }
            }
            let (paths, end) = parse_tree(code, j);
            for p in paths {
                let mut full = base.clone();
                full.extend(p);
                out.push(full);
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// Parses `a::b::{c, d::e}` from `at`; returns the leaf paths and where it ended.
fn parse_tree(code: &str, mut at: usize) -> (Vec<ModPath>, usize) {
    let bytes = code.as_bytes();
    let mut prefix: ModPath = Vec::new();
    loop {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if at < bytes.len() && bytes[at] == b'{' {
            at += 1;
            let mut leaves = Vec::new();
            loop {
                while at < bytes.len() && (bytes[at].is_ascii_whitespace() || bytes[at] == b',') {
                    at += 1;
                }
                if at >= bytes.len() || bytes[at] == b'}' {
                    break;
                }
                let (sub, end) = parse_tree(code, at);
                for s in sub {
                    let mut p = prefix.clone();
                    p.extend(s);
                    leaves.push(p);
                }
                at = end;
                // skip `as name` and anything up to the next separator
                while at < bytes.len() && bytes[at] != b',' && bytes[at] != b'}' {
                    at += 1;
                }
            }
            return (leaves, at + 1);
        }
        let start = at;
        while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
            at += 1;
        }
        if start == at {
            return (vec![prefix], at);
        }
        prefix.push(code[start..at].to_string());
        if code[at..].starts_with("::") {
            at += 2;
        } else {
            return (vec![prefix], at);
        }
    }
}

/// The module a named path lands in: its longest prefix that is a module.
fn owning_module(path: &ModPath, modules: &BTreeSet<ModPath>) -> ModPath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
        .unwrap_or_default()
}

/// Which file named which path, for each edge (what a failure prints).
type Evidence = BTreeMap<(ModPath, String, String), String>;

/// The edges between siblings, keyed by their shared parent.
fn sibling_edges() -> (BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>>, Evidence) {
    let files = source_files();
    let modules: BTreeSet<ModPath> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut graph: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let mut evidence = Evidence::new();
    for (me, text) in &files {
        for named in named_paths(&code_only(text), me) {
            let target = owning_module(&named, &modules);
            let shared = me.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if shared == me.len() || shared == target.len() {
                continue; // itself, its parent or its child
            }
            let key = (me[..shared].to_vec(), me[shared].clone(), target[shared].clone());
            evidence
                .entry(key)
                .or_insert_with(|| format!("{} names {}", me.join("::"), named.join("::")));
            graph
                .entry(me[..shared].to_vec())
                .or_default()
                .entry(me[shared].clone())
                .or_default()
                .insert(target[shared].clone());
        }
    }
    (graph, evidence)
}

/// The groups of modules that reach each other (each group is a cycle),
/// so a failure names every module caught in one, not only the first loop.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = graph.get(from).into_iter().flatten().collect();
        while let Some(n) = todo.pop() {
            if seen.insert(n.clone()) {
                todo.extend(graph.get(n).into_iter().flatten());
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|n| (n, reach(n))).collect();
    let mut groups: Vec<Vec<String>> = Vec::new();
    for (node, from_node) in &reached {
        if !from_node.contains(*node) || groups.iter().any(|g| g.contains(node)) {
            continue;
        }
        let group = from_node
            .iter()
            .filter(|other| reached.get(other).is_some_and(|r| r.contains(*node)))
            .cloned()
            .collect();
        groups.push(group);
    }
    groups
}

#[test]
fn modules_have_no_import_cycle() {
    let mut found = Vec::new();
    let (graphs, evidence) = sibling_edges();
    for (parent, graph) in graphs {
        let place = if parent.is_empty() {
            "crate".to_string()
        } else {
            parent.join("::")
        };
        for group in cycles(&graph) {
            for from in &group {
                for to in graph[from].iter().filter(|to| group.contains(to)) {
                    let why = &evidence[&(parent.clone(), from.clone(), to.clone())];
                    found.push(format!("  {place}: {from} -> {to} ({why})"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "import cycles (ARCHITECTURE.md gives the order; move the shared piece below both):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scanner_sees_grouped_and_relative_paths() {
    let me = vec!["engine".to_string(), "connection".to_string()];
    let code = "use crate::{plan::Plan, engine::{iteration, feed::Feed}};\nuse super::budget::Budget;\n";
    let named = named_paths(code, &me);
    let names: Vec<String> = named.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        names,
        [
            "plan::Plan",
            "engine::iteration",
            "engine::feed::Feed",
            "engine::budget::Budget"
        ]
    );
    let graph = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        (
            "b".to_string(),
            BTreeSet::from(["a".to_string(), "c".to_string()]),
        ),
        ("c".to_string(), BTreeSet::new()),
    ]);
    assert_eq!(cycles(&graph), vec![vec!["a".to_string(), "b".to_string()]]);
}
