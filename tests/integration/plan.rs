//! `volley plan`: drill-style plan files against the embedded target's JSON
//! API. The example plans in examples/plans run here, so CI runs them; the
//! plans' own assertions check what the server received (cookies, headers,
//! bodies), and the per-step statistics check what volley sent.

use super::support::{num, schema_violations, stderr, summary, target, timed, url, volley, volley_json};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/plans")
        .join(name)
        .display()
        .to_string()
}

/// Steps of the first run by name: (requests, errors).
fn steps(report: &Value) -> Vec<(String, u64, u64)> {
    report["runs"][0]["steps"]
        .as_array()
        .expect("a plan's report has steps")
        .iter()
        .map(|s| {
            let sum = &s["summary"];
            (
                s["name"].as_str().unwrap().to_string(),
                num(&sum["requests"]) as u64,
                num(&sum["errors"]) as u64,
            )
        })
        .collect()
}

fn step<'r>(report: &'r Value, name: &str) -> &'r Value {
    report["runs"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| {
            panic!("no step '{name}' in {:?}", steps(report));
        })
}

fn write_plan(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("plan.yml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_api_flow_example_runs_clean() {
    let server = target();
    let base = url(&server, "");
    let (out, report) = volley_json(&["plan", &example("api-flow.yml"), "--base", &base]);
    assert!(out.status.success(), "{}", stderr(&out));
    let by_name = steps(&report);
    for (name, _, errors) in &by_name {
        assert_eq!(
            *errors,
            0,
            "step '{name}' failed: {}",
            step(&report, name)["summary"]["error_examples"]
        );
    }
    let count = |name: &str| by_name.iter().find(|(n, _, _)| n == name).unwrap().1;
    // 40 iterations: one request per plain step, per item with items.
    assert_eq!(count("Ping"), 40);
    assert_eq!(count("Log in"), 40);
    assert_eq!(count("Who am I (cookie)"), 40, "the session cookie was carried");
    assert_eq!(count("List users"), 80, "pick 2 of the range");
    assert_eq!(count("Users from the CSV"), 120);
    assert_eq!(count("Some users"), 120);
    assert_eq!(count("Create a user"), 40);
    assert_eq!(
        count("The session is mine"),
        0,
        "passing assertions are not requests"
    );
    let total = num(&summary(&report)["requests"]) as u64;
    assert_eq!(total, by_name.iter().map(|s| s.1).sum::<u64>());
    assert_eq!(server.stats().requests_completed, total);
    assert_eq!(
        report["plan"]["scenario"]["steps"].as_array().unwrap().len(),
        by_name.len()
    );
    // The per-step series add up to the step's requests.
    let series: f64 = step(&report, "Some users")["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| num(&r["requests"]))
        .sum();
    assert_eq!(series, 120.0);
}

#[test]
fn the_report_of_a_plan_matches_the_schema() {
    let server = target();
    let (_, report) = volley_json(&[
        "plan",
        &example("quickstart.yml"),
        "--base",
        &url(&server, ""),
        "-n",
        "50",
    ]);
    let problems = schema_violations(&report);
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(num(&summary(&report)["requests"]), 50.0, "-n counts iterations");
}

#[test]
fn tags_and_skip_tags_choose_the_items() {
    let server = target();
    let base = url(&server, "");
    let (out, report) = volley_json(&[
        "plan",
        &example("api-flow.yml"),
        "--base",
        &base,
        "--tags",
        "browse",
        "-n",
        "4",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let names: Vec<String> = steps(&report).into_iter().map(|s| s.0).collect();
    assert_eq!(
        names,
        [
            "List users",
            "A user from the list",
            "Users from the CSV",
            "Some users"
        ]
    );
    let (_, report) = volley_json(&[
        "plan",
        &example("api-flow.yml"),
        "--base",
        &base,
        "--skip-tags",
        "auth,write",
        "-n",
        "4",
    ]);
    let names: Vec<String> = steps(&report).into_iter().map(|s| s.0).collect();
    assert!(
        names.contains(&"Ping".to_string()) && names.contains(&"Think".to_string()),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n.contains("Log in") || n.contains("Create")),
        "{names:?}"
    );
}

#[test]
fn a_failing_assertion_is_an_assert_error_of_its_item() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        "plan:\n  - name: Hi\n    request: {url: /hi}\n    assign: hi\n  - name: Expect hello\n    assert:\n      key: hi.body\n      value: hello\n  - name: After\n    request: {url: /hi}\n",
    );
    let (out, report) = volley_json(&[
        "plan",
        plan.to_str().unwrap(),
        "--base",
        &url(&server, ""),
        "-n",
        "10",
        "-c",
        "2",
    ]);
    assert!(out.status.success(), "the requests themselves succeed");
    let s = summary(&report);
    assert_eq!(num(&s["errors_by_kind"]["assert"]), 10.0);
    let failed = &step(&report, "Expect hello")["summary"];
    assert_eq!(num(&failed["errors"]), 10.0);
    let example = failed["error_examples"]["assert"].as_str().unwrap();
    assert!(
        example.contains("Expect hello") && example.contains("'world'") && example.contains("'hello'"),
        "{example}"
    );
    assert_eq!(
        num(&step(&report, "After")["summary"]["requests"]),
        10.0,
        "an assertion does not stop the iteration"
    );
}

#[test]
fn file_settings_apply_and_flags_override_them() {
    let _exclusive = timed();
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        "base: http://127.0.0.1:1\nconcurrency: 2\niterations: 20\nnew_conn_per_iter: true\nsuccess_codes: [404]\nplan:\n  - name: Missing\n    request:\n      url: /api/users/{{ item }}\n      headers: {X-Iteration: '{{ iteration }}'}\n    with_items: [0]\n",
    );
    let base = url(&server, "");
    let (out, report) = volley_json(&["plan", plan.to_str().unwrap(), "--base", &base]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        num(&summary(&report)["ok"]),
        20.0,
        "success_codes made 404 a success"
    );
    assert_eq!(
        server.stats().connections_accepted,
        20,
        "a new connection per iteration"
    );
    // Flags win: 3 connections, 9 iterations, paced at 30 per second.
    let (_, report) = volley_json(&[
        "plan",
        plan.to_str().unwrap(),
        "--base",
        &base,
        "-c",
        "3",
        "-n",
        "9",
        "-R",
        "30",
    ]);
    assert_eq!(num(&summary(&report)["requests"]), 9.0);
    assert_eq!(report["plan"]["connections"], 3);
    let elapsed = num(&summary(&report)["elapsed_s"]);
    assert!(
        (0.25..1.0).contains(&elapsed),
        "9 iterations at 30/s: {elapsed} s"
    );
}

#[test]
fn run_time_limits_a_plan() {
    let _exclusive = timed();
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        "run_time: 600ms\nconcurrency: 2\nplan:\n  - name: Slow\n    request: {url: /sleep/20}\n",
    );
    let (out, report) = volley_json(&["plan", plan.to_str().unwrap(), "--base", &url(&server, "")]);
    assert!(out.status.success());
    let elapsed = num(&summary(&report)["elapsed_s"]);
    assert!((0.55..0.9).contains(&elapsed), "{elapsed}");
    assert!(num(&summary(&report)["requests"]) > 30.0);
}

#[test]
fn response_values_flow_into_later_requests() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        r#"plan:
  - name: Login
    request:
      url: /api/login
      method: POST
      body: '{"username": "ann", "password": "secret"}'
    assign: login
  - name: Type
    assert: {key: login.headers.content-type, value: application/json}
  - name: Status
    assert: {key: login.status, value: '200'}
  - name: Echo
    request:
      url: /echo
      method: POST
      body: 'token={{ login.body.token }}&user={{ login.body.user }}'
    assign: echo
  - name: Echoed
    assert: {key: echo.body, value: 'token=tok-ann&user=ann'}
"#,
    );
    let (out, report) = volley_json(&[
        "plan",
        plan.to_str().unwrap(),
        "--base",
        &url(&server, ""),
        "-n",
        "5",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(num(&summary(&report)["errors"]), 0.0, "{}", summary(&report));
}

#[test]
fn malformed_plan_files_exit_2_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        "base: http://127.0.0.1:1\nplan:\n  - name: a\n    request:\n      url: /\n      verb: GET\n",
    );
    let out = volley(&["plan", plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("plan.yml:6") && err.contains("'verb'"), "{err}");
    let out = volley(&["plan", "/nonexistent/plan.yml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read"));
    let out = volley(&["plan", plan.to_str().unwrap(), "-m", "POST"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_plan_can_be_stepped() {
    let _exclusive = timed();
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        &format!(
            "base: '{}'\nplan:\n  - name: Slow\n    request: {{url: /sleep/10}}\n",
            url(&server, "")
        ),
    );
    let (out, report) = volley_json(&[
        "step",
        "--plan",
        plan.to_str().unwrap(),
        "--levels",
        "1,4",
        "--step-duration",
        "500ms",
        "--slo",
        "p99<1s",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let levels = report["step"]["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    // Four connections on a 10 ms endpoint carry about four times one.
    let (one, four) = (num(&levels[0]["rps"]), num(&levels[1]["rps"]));
    assert!(four > 2.5 * one, "{one} then {four}");
    assert_eq!(report["runs"][1]["steps"][0]["name"], "Slow");
}

/// The README's example plan, and the quickstart, run as written.
#[test]
fn the_other_examples_run_clean() {
    let server = target();
    let base = url(&server, "");
    for (file, requests) in [("login-and-browse.yml", 20 * 7), ("quickstart.yml", 1000)] {
        let (out, report) = volley_json(&["plan", &example(file), "--base", &base]);
        assert!(out.status.success(), "{file}: {}", stderr(&out));
        let s = summary(&report);
        assert_eq!(num(&s["errors"]), 0.0, "{file}: {s}");
        assert_eq!(num(&s["requests"]), requests as f64, "{file}");
    }
}

/// rampup ramps the connections (the series' targets), `{{ index }}` counts
/// the items (seen in the statuses), and the log shows each item's rows.
#[test]
fn rampup_index_and_the_per_step_log() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        "concurrency: 4\nrampup: 1\nrun_time: 1500ms\nplan:\n  - name: Indexed status\n    request: {url: '/status/20{{ index }}'}\n    with_items: [a, b, c]\n",
    );
    let (out, report) = volley_json(&[
        "plan",
        plan.to_str().unwrap(),
        "--base",
        &url(&server, ""),
        "--interval",
        "250ms",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let targets: Vec<f64> = report["runs"][0]["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| num(&r["load"]))
        .collect();
    assert_eq!(&targets[..5], &[1.0, 2.0, 3.0, 4.0, 4.0], "{targets:?}");
    let status = &summary(&report)["status"];
    let (a, b, c) = (num(&status["200"]), num(&status["201"]), num(&status["202"]));
    // Items go in order; iterations cut off at the end (at most one per
    // connection) may miss their last items.
    assert!(a > 0.0 && a >= b && b >= c && a - c <= 4.0, "{status}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.matches("  Indexed status").count() >= 6,
        "a step row per interval: {text}"
    );
    assert!(text.contains("steps\n"), "{text}");
}

/// The text table of steps shows each name whole: two names that begin
/// alike for more than 24 characters are told apart, and a step none of
/// whose requests succeeded shows dashes, not 0.000, for its latency.
#[test]
fn the_steps_table_shows_whole_names_and_no_latency_for_a_failed_step() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("names.yml");
    std::fs::write(
        &plan,
        format!(
            "base: '{}'\niterations: 5\nplan:\n  - name: Fetch the user's account page first\n    request: {{url: /hi}}\n  - name: Fetch the user's account page again\n    request: {{url: /status/500}}\n",
            url(&server, "")
        ),
    )
    .unwrap();
    let out = volley(&["plan", "-q", plan.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    let row = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no row for '{name}' in:\n{text}"))
            .to_string()
    };
    let last_three =
        |row: &str| -> Vec<String> { row.split_whitespace().rev().take(3).map(str::to_string).collect() };
    let answered = row("Fetch the user's account page first");
    assert!(
        last_three(&answered).iter().all(|c| c.parse::<f64>().is_ok()),
        "{answered}"
    );
    let failed = row("Fetch the user's account page again");
    assert_eq!(last_three(&failed), ["-", "-", "-"], "{failed}");
}

/// A plan's -n and -R count iterations of its flow, and step's
/// --step-requests with --plan too: the help says so, where `volley run`'s
/// -n counts requests.
#[test]
fn the_help_says_a_plan_counts_iterations() {
    let help = |command: &str| {
        let out = volley(&[command, "--help"]);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).replace('\n', " ")
    };
    let flag = |text: &str, flag: &str| -> String {
        let at = text.find(flag).unwrap_or_else(|| panic!("no {flag} in {text}"));
        text[at..].chars().take(160).collect()
    };
    let plan = help("plan");
    let n = flag(&plan, "--requests <REQUESTS>");
    assert!(n.contains("iterations of the plan's flow"), "{n}");
    let rate = flag(&plan, "--rate [<N>]");
    assert!(
        rate.contains("iterations of the plan's flow per second"),
        "{rate}"
    );
    let step = flag(&help("step"), "--step-requests <N>");
    assert!(step.contains("with --plan: this many iterations"), "{step}");
    let run = flag(&help("run"), "--requests <REQUESTS>");
    assert!(run.contains("measured requests"), "{run}");
}
