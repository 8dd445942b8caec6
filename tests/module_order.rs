//! The source's stated rules hold: the modules stack in the order
//! ARCHITECTURE.md gives, and unsafe code lives only in the files Cargo.toml
//! lists. This test reads every file under `src/`, collects the `crate::` and
//! `super::` paths its non-test code names, and fails when a module names one
//! on its own level or above it in ARCHITECTURE.md's order, when a module is
//! missing from that order, and on any import cycle, so neither the code nor
//! the document can drift from the other.
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

/// One file under `src/`: its path, its module path (`src/engine/mod.rs` is
/// `engine`, `src/sink/dashboard/server.rs` is `sink::dashboard::server`)
/// and its text.
struct SourceFile {
    path: String,
    module: ModPath,
    text: String,
}

impl SourceFile {
    /// The binary sits on top of everything, and tests may look anywhere:
    /// neither takes part in the order.
    fn is_ordered(&self) -> bool {
        self.module != ["main"] && !self.module.iter().any(|p| p == "tests")
    }
}

/// Every `.rs` file under `src/`, in a stable order.
fn source_files() -> Vec<SourceFile> {
    fn walk(dir: &Path, out: &mut Vec<SourceFile>) {
        let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix("src").unwrap();
                let mut module: ModPath = rel
                    .iter()
                    .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                    .collect();
                if module.last().is_some_and(|p| p == "mod" || p == "lib") {
                    module.pop();
                }
                out.push(SourceFile {
                    path: path.to_string_lossy().into_owned(),
                    module,
                    text: fs::read_to_string(&path).unwrap(),
                });
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
    let files: Vec<SourceFile> = source_files()
        .into_iter()
        .filter(SourceFile::is_ordered)
        .collect();
    let modules: BTreeSet<ModPath> = files.iter().map(|f| f.module.clone()).collect();
    let mut graph: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let mut evidence = Evidence::new();
    for SourceFile { module: me, text, .. } in &files {
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

/// One namespace's modules and whom each names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// A namespace's stated order: its modules level by level, top first.
type Levels = Vec<Vec<String>>;

/// The backticked names in `text`, in order: "`a`, `b::c` and `d`" gives
/// `a`, `b::c`, `d`.
fn backticked(text: &str) -> Vec<String> {
    text.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// The orders ARCHITECTURE.md states, keyed by namespace (the crate is the
/// empty path). Under "## Module order, top to bottom", each numbered item
/// is a level: the backticked names before its first colon. Under "##
/// Inside modules" (up to the next heading), each line `- \`parent\`: \`a\` > \`b\`, \`c\``
/// orders the parent's children, `>` between levels and `,` within one.
fn stated_orders(doc: &str) -> BTreeMap<ModPath, Levels> {
    let mut orders: BTreeMap<ModPath, Levels> = BTreeMap::new();
    let mut section = "";
    for line in doc.lines() {
        if line.starts_with('#') {
            section = line.trim_start_matches('#').trim();
            continue;
        }
        if section == "Module order, top to bottom" {
            let Some((number, rest)) = line.split_once(". ") else {
                continue;
            };
            if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let names = rest.split_once(':').map_or(rest, |(names, _)| names);
            let level = backticked(names);
            assert!(
                !level.is_empty(),
                "ARCHITECTURE.md: level {number} names no module: {line}"
            );
            orders.entry(Vec::new()).or_default().push(level);
        } else if section == "Inside modules" {
            let Some(rest) = line.strip_prefix("- `") else {
                continue;
            };
            let (parent, order) = rest
                .split_once("`:")
                .unwrap_or_else(|| panic!("ARCHITECTURE.md: no `parent`: before the order in {line}"));
            let levels: Levels = order.split('>').map(backticked).collect();
            assert!(
                levels.iter().all(|l| !l.is_empty()),
                "ARCHITECTURE.md: an empty level in {line}"
            );
            let parent: ModPath = parent.split("::").map(str::to_string).collect();
            assert!(
                orders.insert(parent.clone(), levels).is_none(),
                "ARCHITECTURE.md orders {} twice",
                parent.join("::")
            );
        }
    }
    orders
}

/// Where one namespace's code disagrees with its stated order: a module
/// that names one on its own level or above it, a module the order leaves
/// out, a name the order lists that is no module. `place` names the
/// namespace in the messages; `evidence` says which path made each edge.
fn disagreements(
    place: &str,
    levels: &Levels,
    modules: &BTreeSet<String>,
    graph: &Graph,
    evidence: &dyn Fn(&str, &str) -> String,
) -> Vec<String> {
    let mut found = Vec::new();
    let mut level_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (at, level) in levels.iter().enumerate() {
        for name in level {
            if level_of.insert(name, at + 1).is_some() {
                found.push(format!("  {place}: `{name}` is listed twice"));
            }
            if !modules.contains(name) {
                found.push(format!("  {place}: `{name}` is listed but is no module"));
            }
        }
    }
    for name in modules {
        if !level_of.contains_key(name.as_str()) {
            found.push(format!(
                "  {place}: `{name}` is missing: add it to the level where it belongs"
            ));
        }
    }
    for (from, tos) in graph {
        for to in tos {
            let (Some(&from_level), Some(&to_level)) =
                (level_of.get(from.as_str()), level_of.get(to.as_str()))
            else {
                continue; // already reported as missing
            };
            if to_level <= from_level {
                let where_ = if to_level == from_level {
                    "on its own level"
                } else {
                    "above it"
                };
                found.push(format!(
                    "  {place}: `{from}` (level {from_level}) names `{to}` (level {to_level}), {where_} ({})",
                    evidence(from, to)
                ));
            }
        }
    }
    found
}

/// The children of `parent` that have a file (the binary's `main` counts
/// at the top; `tests` files do not).
fn children(files: &[SourceFile], parent: &ModPath) -> BTreeSet<String> {
    files
        .iter()
        .filter(|f| !f.module.iter().any(|p| p == "tests"))
        .filter(|f| f.module.len() == parent.len() + 1 && f.module.starts_with(parent))
        .map(|f| f.module[parent.len()].clone())
        .collect()
}

#[test]
fn the_code_follows_the_order_architecture_md_states() {
    let doc = fs::read_to_string("ARCHITECTURE.md").unwrap();
    let orders = stated_orders(&doc);
    assert!(
        orders.contains_key(&Vec::new()),
        "ARCHITECTURE.md states no module order"
    );
    let files = source_files();
    let (graphs, evidence) = sibling_edges();
    let mut found = Vec::new();
    for (parent, levels) in &orders {
        let place = if parent.is_empty() {
            "crate".to_string()
        } else {
            parent.join("::")
        };
        let graph = graphs.get(parent).cloned().unwrap_or_default();
        let why =
            |from: &str, to: &str| evidence[&(parent.clone(), from.to_string(), to.to_string())].clone();
        found.extend(disagreements(
            &place,
            levels,
            &children(&files, parent),
            &graph,
            &why,
        ));
    }
    for (parent, graph) in &graphs {
        if !orders.contains_key(parent) {
            let (from, tos) = graph.iter().next().unwrap();
            found.push(format!(
                "  {}: its modules name each other ({from} -> {}) but ARCHITECTURE.md states no order for them (add it under Inside modules)",
                parent.join("::"),
                tos.iter().next().unwrap()
            ));
        }
    }
    assert!(
        found.is_empty(),
        "the code and ARCHITECTURE.md's module order disagree (when a module must name one above it, move the piece both need below both):\n{}",
        found.join("\n")
    );
}

/// Whether the non-test code of a file writes `unsafe` (a block, fn, impl,
/// trait or extern block).
fn has_unsafe_code(text: &str) -> bool {
    let code = code_only(text);
    code.match_indices("unsafe").any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + "unsafe".len()..].trim_start();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && ["{", "fn ", "impl", "trait ", "extern "]
                .iter()
                .any(|next| after.starts_with(next))
    })
}

/// The files Cargo.toml's comment says unsafe code lives in: the backticked
/// `src/...` paths of the comment block that says "Unsafe code lives only".
fn files_cargo_toml_allows_unsafe_in(manifest: &str) -> BTreeSet<String> {
    let comments: Vec<&str> = manifest
        .lines()
        .map(str::trim)
        .skip_while(|l| !(l.starts_with('#') && l.contains("Unsafe code lives only")))
        .take_while(|l| l.starts_with('#'))
        .collect();
    assert!(
        !comments.is_empty(),
        "Cargo.toml has no comment saying where unsafe code lives only"
    );
    backticked(&comments.join(" "))
        .into_iter()
        .filter(|p| p.starts_with("src/"))
        .collect()
}

#[test]
fn unsafe_code_lives_only_where_cargo_toml_says() {
    let listed = files_cargo_toml_allows_unsafe_in(&fs::read_to_string("Cargo.toml").unwrap());
    let found: BTreeSet<String> = source_files()
        .into_iter()
        .filter(|f| has_unsafe_code(&f.text))
        .map(|f| f.path)
        .collect();
    assert_eq!(
        found, listed,
        "the files with unsafe code (left) and Cargo.toml's list of them (right) differ: list every file that needs it, and only those"
    );
    assert!(has_unsafe_code("fn f() {\n    let x = unsafe { g() };\n}\n"));
    assert!(!has_unsafe_code(
        "// unsafe { g() }\n#![deny(unsafe_op_in_unsafe_fn)]\n#[cfg(test)]\nmod tests {\n    fn t() { unsafe { g() } }\n}\n"
    ));
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

#[test]
fn the_order_is_read_from_the_document_and_can_fail() {
    let doc = "# x\n## Module order, top to bottom\n\n1. `main`: the binary.\n2. `run`, `step`: commands,\n   over `engine`.\n3. `engine`\n\n## Inside modules\n\n- `engine`: `worker` > `feed`, `timer`\n";
    let orders = stated_orders(doc);
    let s = |v: &[&str]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert_eq!(
        orders[&Vec::new()],
        vec![s(&["main"]), s(&["run", "step"]), s(&["engine"])]
    );
    assert_eq!(
        orders[&s(&["engine"])],
        vec![s(&["worker"]), s(&["feed", "timer"])]
    );

    let levels = &orders[&Vec::new()];
    let modules: BTreeSet<String> = ["main", "run", "step", "engine", "sink"].map(String::from).into();
    let graph = Graph::from([
        ("run".to_string(), BTreeSet::from(["engine".to_string()])),
        ("engine".to_string(), BTreeSet::from(["run".to_string()])),
        ("step".to_string(), BTreeSet::from(["run".to_string()])),
    ]);
    let found = disagreements("crate", levels, &modules, &graph, &|a, b| {
        format!("{a} names {b}")
    });
    assert_eq!(
        found,
        [
            "  crate: `sink` is missing: add it to the level where it belongs",
            "  crate: `engine` (level 3) names `run` (level 2), above it (engine names run)",
            "  crate: `step` (level 2) names `run` (level 2), on its own level (step names run)",
        ]
    );
}
