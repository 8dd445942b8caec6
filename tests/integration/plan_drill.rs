//! drill's plan-file forms that real files use (drill's SYNTAX.md and its
//! example folder, written here in our own words): each test is a plan
//! file that drill runs and that volley must run unchanged.

use super::support::{num, stderr, summary, target, timed, url, volley_json};
use serde_json::Value;
use std::path::Path;

/// Requests and errors of the step named `name` in the first run.
fn counts(report: &Value, name: &str) -> (u64, u64) {
    let step = report["runs"][0]["steps"]
        .as_array()
        .expect("a plan's report has steps")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step '{name}' in {}", report["runs"][0]["steps"]));
    let sum = &step["summary"];
    (num(&sum["requests"]) as u64, num(&sum["errors"]) as u64)
}

/// Runs `plan` (written in `dir`) against a fresh target; the report.
fn run_plan(dir: &Path, plan: &str, extra: &[&str]) -> Value {
    let server = target();
    let path = dir.join("benchmark.yml");
    std::fs::write(&path, plan).unwrap();
    let base = url(&server, "");
    let mut args = vec!["plan", path.to_str().unwrap(), "--base", &base];
    args.extend_from_slice(extra);
    let (out, report) = volley_json(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    report
}

#[test]
fn an_included_file_may_open_with_a_document_marker() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("part.yml"),
        "# one payload size\n# another comment\r\n---\n\n- name: Included ping\n  request:\n    url: /hi\n  tags: ['small']\n",
    )
    .unwrap();
    let report = run_plan(
        dir.path(),
        "\u{feff}---\nconcurrency: 1\niterations: 3\nplan:\n  - name: Sizes\n    include: part.yml\n",
        &[],
    );
    assert_eq!(counts(&report, "Included ping"), (3, 0));
}

#[test]
fn a_two_character_quote_char_uses_its_first_byte() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ids.csv"), "id,name\n1,\\ann\\\n2,bob\n").unwrap();
    let report = run_plan(
        dir.path(),
        r#"iterations: 2
plan:
  - name: From CSV
    request:
      url: /api/users/{{ item.id }}
    with_items_from_csv:
      file_name: ids.csv
      quote_char: "\\'"
"#,
        &[],
    );
    assert_eq!(counts(&report, "From CSV"), (4, 0));
}

#[test]
fn bracket_paths_work_in_templates_and_assert_keys() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_plan(
        dir.path(),
        r#"iterations: 2
plan:
  - name: Complex
    request:
      url: /echo
      method: POST
      body: '{"body": [{"phones": ["a"]}, {"phones": ["b", "c"]}]}'
    assign: complex
  - name: Use it
    request:
      url: /echo
      method: POST
      body: '{{ complex.body.body[1].phones[1] }}'
    assign: used
  - name: Check key
    assert:
      key: complex.body.body[1]["phones"][0]
      value: b
  - name: Check use
    assert:
      key: used.body
      value: c
"#,
        &[],
    );
    assert_eq!(num(&summary(&report)["errors"]), 0.0, "{}", summary(&report));
    assert_eq!(counts(&report, "Use it"), (2, 0));
}

#[test]
fn top_level_values_take_environment_variables() {
    // SAFETY: a variable no other test reads; the child inherits it.
    unsafe {
        std::env::set_var("VOLLEY_DRILL_TEST_ITERATIONS", "4");
        std::env::set_var("VOLLEY_DRILL_TEST_CONCURRENCY", "2");
    }
    let dir = tempfile::tempdir().unwrap();
    let report = run_plan(
        dir.path(),
        "iterations: '{{ VOLLEY_DRILL_TEST_ITERATIONS }}'\nconcurrency: '{{VOLLEY_DRILL_TEST_CONCURRENCY}}'\nrampup: '0'\nplan:\n  - name: Ping\n    request:\n      url: /hi\n",
        &[],
    );
    assert_eq!(counts(&report, "Ping"), (4, 0));
}

#[test]
fn headers_a_plan_sets_replace_volley_s_own() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_plan(
        dir.path(),
        r#"iterations: 2
plan:
  - name: Headers
    request:
      url: /api/echo-headers
      headers:
        Host: example.test
        User-Agent: drill-layout
    assign: seen
  - name: One host
    assert: {key: seen.body.host, value: example.test}
  - name: One agent
    assert: {key: seen.body.user-agent, value: drill-layout}
"#,
        &[],
    );
    assert_eq!(counts(&report, "Headers"), (2, 0));
    assert_eq!(counts(&report, "One host").1, 0, "{}", summary(&report));
    assert_eq!(counts(&report, "One agent").1, 0, "{}", summary(&report));
}

#[test]
fn exec_assigns_its_trimmed_output_and_is_not_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_plan(
        dir.path(),
        r#"concurrency: 2
iterations: 5
plan:
  - name: Make a token
    exec:
      command: "printf 'tok-%s  \n\n' {{ iteration }}"
    assign: token
  - name: Send it
    request:
      url: /echo
      method: POST
      body: '{{ token }}'
    assign: sent
  - name: Came back
    assert: {key: sent.body, value: 'tok-{{ iteration }}'}
"#,
        &[],
    );
    let s = summary(&report);
    // Five requests in the totals: the five commands are not requests.
    assert_eq!(num(&s["requests"]), 5.0, "{s}");
    assert_eq!(num(&s["errors"]), 0.0, "{s}");
    assert_eq!(counts(&report, "Make a token"), (5, 0));
    assert_eq!(counts(&report, "Send it"), (5, 0));
    assert_eq!(counts(&report, "Came back"), (0, 0));
    let step = &report["runs"][0]["steps"][0]["summary"];
    assert!(num(&step["latency_ms"]["max"]) > 0.0, "{step}");
    assert!(super::support::schema_violations(&report).is_empty());
}

#[test]
fn a_failing_exec_is_an_error_of_kind_exec_that_ends_the_iteration() {
    let dir = tempfile::tempdir().unwrap();
    let report = run_plan(
        dir.path(),
        r#"iterations: 3
plan:
  - name: Before
    request: {url: /hi}
  - name: Broken
    exec: {command: "echo 'no such thing' >&2; exit 7"}
  - name: After
    request: {url: /hi}
"#,
        &[],
    );
    assert_eq!(counts(&report, "Before"), (3, 0));
    assert_eq!(counts(&report, "Broken"), (3, 3));
    assert_eq!(counts(&report, "After"), (0, 0));
    let broken = &report["runs"][0]["steps"][1]["summary"];
    assert_eq!(num(&broken["errors_by_kind"]["exec"]), 3.0, "{broken}");
    let example = broken["error_examples"]["exec"].as_str().unwrap();
    assert!(
        example.contains("exited with status 7") && example.contains("no such thing"),
        "{example}"
    );
    // The totals count the HTTP requests alone.
    assert_eq!(num(&summary(&report)["requests"]), 3.0);
    assert!(super::support::schema_violations(&report).is_empty());
}

#[test]
fn exec_does_not_block_the_worker_thread() {
    let _alone = timed();
    let dir = tempfile::tempdir().unwrap();
    // One worker thread, four connections, each iteration a 0.5 s command:
    // run one after another they would take 2 s; side by side, about 0.5.
    let report = run_plan(
        dir.path(),
        "concurrency: 4\niterations: 4\nplan:\n  - name: Wait\n    exec: {command: 'sleep 0.5'}\n  - name: Ping\n    request: {url: /hi}\n",
        &["-t", "1"],
    );
    assert_eq!(counts(&report, "Wait"), (4, 0));
    assert_eq!(counts(&report, "Ping"), (4, 0));
    let elapsed = num(&summary(&report)["elapsed_s"]);
    assert!(
        elapsed < 1.5,
        "4 commands of 0.5 s took {elapsed} s on one thread"
    );
}

#[test]
fn anchors_and_aliases_are_resolved_as_drill_does() {
    let dir = tempfile::tempdir().unwrap();
    // Counts checked against drill 0.9 on the same file: 2, 4, 4 and 2.
    let report = run_plan(
        dir.path(),
        r#"iterations: 2
shared: &ping
  url: /hi
  headers: {X-Kind: &kind anchored}
plan:
  - name: Aliased request
    request: *ping
  - &users
    name: Anchored item
    request:
      url: /api/users/{{ item }}
    with_items: &ids [1, 2]
  - name: Aliased list
    request: {url: /hi}
    with_items: *ids
  - name: Aliased header
    request:
      url: /api/echo-headers
      headers: {X-Kind: *kind}
    assign: seen
  - name: Header arrived
    assert: {key: seen.body.x-kind, value: anchored}
"#,
        &[],
    );
    assert_eq!(counts(&report, "Aliased request"), (2, 0));
    assert_eq!(counts(&report, "Anchored item"), (4, 0));
    assert_eq!(counts(&report, "Aliased list"), (4, 0));
    assert_eq!(counts(&report, "Aliased header"), (2, 0));
    assert_eq!(counts(&report, "Header arrived"), (0, 0));
}

#[test]
fn a_multi_megabyte_folded_body_is_sent_whole() {
    let dir = tempfile::tempdir().unwrap();
    // A real layout's payload file: a JSON document of ~3 MB folded over
    // many lines with `>` (the lines join with single spaces).
    let lines: Vec<String> = (0..45_000)
        .map(|i| {
            format!("{{\"id\": {i:06}, \"name\": \"user number {i:06}\", \"tags\": [\"a\", \"b\", \"c\"]}},")
        })
        .collect();
    let mut plan = String::from(
        "concurrency: 2\niterations: 4\nplan:\n  - name: Large\n    request:\n      url: /echo\n      method: POST\n      headers:\n        Content-Type: application/json\n      body: >\n        [\n",
    );
    for line in &lines {
        plan.push_str("        ");
        plan.push_str(line);
        plan.push('\n');
    }
    plan.push_str("        {}]\n    tags: [large]\n");
    // "[", then " " and each line, then " {}]" and the final newline.
    let folded = 1 + lines.iter().map(|l| 1 + l.len()).sum::<usize>() + 4 + 1;
    assert!(folded > 3_000_000, "{folded}");
    let report = run_plan(dir.path(), &plan, &["--tags", "large"]);
    assert_eq!(counts(&report, "Large"), (4, 0));
    // /echo sends the body back: each response is the folded body plus a head.
    let bytes = num(&report["runs"][0]["steps"][0]["summary"]["bytes"]) as usize;
    assert!(
        bytes >= 4 * folded && bytes < 4 * (folded + 1024),
        "{bytes} vs 4 x {folded}"
    );
}

#[test]
fn hex_bodies_and_items_from_a_file_work_as_in_drill() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ids.txt"), "3\n14\n15\n").unwrap();
    let report = run_plan(
        dir.path(),
        r#"iterations: 2
plan:
  - name: Raw bytes
    request:
      url: /echo
      method: POST
      body: {hex: 65 78 61 6D 70 6C 65}
    assign: raw
  - name: Bytes arrived
    assert: {key: raw.body, value: example}
  - name: Line items
    request: {url: '/api/users/{{ item }}'}
    with_items_from_file: ids.txt
"#,
        &[],
    );
    assert_eq!(counts(&report, "Raw bytes"), (2, 0));
    assert_eq!(counts(&report, "Bytes arrived"), (0, 0));
    assert_eq!(counts(&report, "Line items"), (6, 0));
}

#[test]
fn every_method_drill_names_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let mut plan = String::from("iterations: 2\nplan:\n");
    for method in ["GET", "POST", "PUT", "PATCH", "HEAD", "DELETE"] {
        plan.push_str(&format!(
            "  - name: {method}\n    request: {{url: /echo, method: {}, body: 'x'}}\n",
            method.to_lowercase()
        ));
    }
    let report = run_plan(dir.path(), &plan, &[]);
    for method in ["GET", "POST", "PUT", "PATCH", "HEAD", "DELETE"] {
        assert_eq!(counts(&report, method), (2, 0), "{method}: {}", summary(&report));
    }
}
