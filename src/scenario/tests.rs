//! Loading plan files: every key, includes, tags, items, and the error for
//! each kind of malformed file (file, line and key named).

use super::*;
use std::fs;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).unwrap();
    path
}

fn load_text(text: &str) -> Result<Scenario, FileError> {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "plan.yml", text);
    load(&path, &TagFilter::default(), None)
}

fn error_of(text: &str) -> String {
    load_text(text).unwrap_err().to_string()
}

const FULL: &str = r#"---
base: 'http://127.0.0.1:3000'
concurrency: 4
iterations: 20
rampup: 2
run_time: 30s
success_codes: [200, 201]
new_conn_per_iter: false
plan:
  - name: Log in
    request:
      url: /api/login
      method: post
      headers:
        Content-Type: application/json
      body: '{"username": "u{{ iteration }}", "password": "secret"}'
    assign: login
  - name: Check login
    assert:
      key: login.status
      value: 200
  - name: Remember
    assign:
      key: who
      value: "{{ login.body.user }}"
  - name: Fetch users
    request:
      url: /api/users/{{ item }}
    with_items: [1, 2, 3]
    tags: [users]
  - name: Fetch range
    request:
      url: "{{ base }}/api/users/{{ item }}?i={{ index }}"
    with_items_range: { start: 10, step: 5, stop: 20 }
    shuffle: true
    pick: 2
    tags: [users, slow]
  - name: Pause
    delay:
      seconds: 0.5
  - name: From CSV
    request:
      url: /api/users/{{ item.id }}
      headers:
        X-Who: '{{ who }}'
    with_items_from_csv: users.csv
  - name: Upload
    request:
      url: /api/users
      method: POST
      body:
        file: body.json
  - name: More
    include: more.yml
"#;

#[test]
fn reads_every_key() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "users.csv", "id,name\n1,a\n2,b\n");
    write(dir.path(), "body.json", r#"{"name":"x"}"#);
    write(
        dir.path(),
        "more.yml",
        "- name: Included\n  request:\n    url: /hi\n  tags: [extra]\n",
    );
    let path = write(dir.path(), "plan.yml", FULL);
    let s = load(&path, &TagFilter::default(), None).unwrap();
    assert_eq!(s.settings.base.as_deref(), Some("http://127.0.0.1:3000"));
    assert_eq!(
        (s.settings.concurrency, s.settings.iterations),
        (Some(4), Some(20))
    );
    assert_eq!(
        (s.settings.rampup, s.settings.run_time),
        (Some(Duration::from_secs(2)), Some(Duration::from_secs(30)))
    );
    assert_eq!(s.settings.success_codes, Some(vec![200, 201]));
    let names: Vec<&str> = s.steps.iter().map(|st| st.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Log in",
            "Check login",
            "Remember",
            "Fetch users",
            "Fetch range",
            "Pause",
            "From CSV",
            "Upload",
            "Included"
        ]
    );
    assert_eq!(s.var_names, ["login", "who"]);
    let StepKind::Request(range) = &s.steps[4].kind else {
        panic!()
    };
    let items = range.items.as_ref().unwrap();
    assert_eq!(
        items.values,
        vec![Value::from(10), Value::from(15), Value::from(20)]
    );
    assert_eq!((items.shuffle, items.pick), (true, Some(2)));
    let StepKind::Request(csv) = &s.steps[6].kind else {
        panic!()
    };
    assert_eq!(csv.items.as_ref().unwrap().values[1]["name"], "b");
    let StepKind::Request(upload) = &s.steps[7].kind else {
        panic!()
    };
    assert!(matches!(&upload.body, Body::Bytes(b) if b == br#"{"name":"x"}"#));
    assert!(matches!(s.steps[5].kind, StepKind::Delay(d) if d == Duration::from_millis(500)));
}

#[test]
fn tags_and_skip_tags_select_items() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "users.csv", "id\n1\n");
    write(dir.path(), "body.json", "{}");
    write(
        dir.path(),
        "more.yml",
        "- name: Included\n  request:\n    url: /hi\n  tags: [extra]\n",
    );
    let path = write(dir.path(), "plan.yml", FULL);
    let only = TagFilter {
        tags: vec!["users".into()],
        skip_tags: vec![],
    };
    let names: Vec<String> = load(&path, &only, None)
        .unwrap()
        .steps
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["Fetch users", "Fetch range"]);
    let skip = TagFilter {
        tags: vec![],
        skip_tags: vec!["slow".into(), "extra".into()],
    };
    let names: Vec<String> = load(&path, &skip, None)
        .unwrap()
        .steps
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert!(!names.contains(&"Fetch range".to_string()) && !names.contains(&"Included".to_string()));
    assert!(names.contains(&"Fetch users".to_string()));
}

/// Each malformed file names its line and what is wrong.
#[test]
fn malformed_files_are_errors_with_line_and_key() {
    let cases: &[(&str, &str)] = &[
        (
            "base: x\nplan:\n  - name: a\n    request:\n      url: /\n    exec:\n      command: ls\n",
            ":3: plan item 'a' has both 'request' and 'exec'",
        ),
        (
            "plan:\n  - name: a\n    exec: {cmd: ls}\n",
            ":3: unsupported key 'cmd' in 'exec' (supported: command)",
        ),
        ("plan:\n  - name: a\n    exec: {}\n", ":3: 'exec' needs 'command'"),
        (
            "plan:\n  - name: a\n    exec: {command: 'echo {{ nope }}'}\n",
            "nope",
        ),
        (
            "plan:\n  - name: a\n    exec: {command: ls}\n    with_items: [1]\n",
            "with_items goes with 'request'",
        ),
        (
            "d: &d {url: /}\nplan:\n  - name: a\n    request:\n      <<: *d\n",
            ":5: merge keys ('<<') are not supported in 'request'",
        ),
        (
            "plan:\n  - name: a\n    request: *nothing\n",
            ":3: not valid YAML",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /, body: {hex: 4}}\n",
            ":3: 'hex' has an odd number of digits (1)",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /, body: {hex: zz}}\n",
            "'hex' has 'zz', which is not a hex byte",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /, body: {hex: '00', file: x}}\n",
            "'body' needs one of 'file', 'hex' or text",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    with_items_from_file: missing.txt\n",
            "cannot read the items file",
        ),
        (
            "base: x\nthreads: 4\nplan: []\n",
            ":2: unsupported key 'threads' in the benchmark file",
        ),
        ("base: x\n", "has no 'plan'"),
        (
            "plan:\n  - request:\n      url: /\n",
            ":2: a plan item needs a 'name'",
        ),
        (
            "plan:\n  - name: a\n    request:\n      method: GET\n",
            "the request of 'a' needs a 'url'",
        ),
        (
            "plan:\n  - name: a\n    request:\n      url: /\n      timeout: 3\n",
            ":5: unsupported key 'timeout' in 'request'",
        ),
        ("plan:\n  - name: a\n", "does nothing"),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    delay: {seconds: 1}\n",
            "has both 'request' and 'delay'",
        ),
        (
            "concurrency: many\nplan:\n  - name: a\n    request: {url: /}\n",
            ":1: 'concurrency' must be a number",
        ),
        (
            "plan:\n  - name: a\n    request: {url: '/{{ nope.x }}'}\n",
            "no earlier item assigns 'nope'",
        ),
        (
            "plan:\n  - name: a\n    request: {url: '/{{ item }}'}\n",
            "this item has no with_items",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    with_items: [1]\n    with_items_range: {start: 1, stop: 2}\n",
            "has both 'with_items' and 'with_items_range'",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    with_items_range: {start: 5, stop: 1}\n",
            "stop >= start",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    shuffle: true\n",
            "'shuffle' and 'pick' go with with_items",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    with_items: [1, 2]\n    pick: 3\n",
            "'pick' must be between 1 and the 2 items",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    with_items_from_csv: missing.csv\n",
            "cannot read the CSV file",
        ),
        ("plan:\n  - name: a\n    include: missing.yml\n", "cannot include"),
        (
            "plan:\n  - name: a\n    request:\n      url: /\n      body: {file: nope.bin}\n",
            "cannot read the body file",
        ),
        (
            "plan:\n  - name: a\n    assert: {key: status}\n",
            "'assert' needs 'value'",
        ),
        (
            "plan:\n  - name: a\n    delay: {minutes: 1}\n",
            "unsupported key 'minutes' in 'delay'",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /, method: 'G T'}\n",
            "invalid method",
        ),
        ("plan: [\n", "not valid YAML"),
        ("- just\n- a list\n", "must be a mapping"),
        (
            "success_codes: [abc]\nplan:\n  - name: a\n    request: {url: /}\n",
            "'success_codes' must list status codes",
        ),
        (
            "base: [a, b]\nplan:\n  - name: a\n    request: {url: /}\n",
            ":1: 'base' must be a single value",
        ),
        (
            "new_conn_per_iter: maybe\nplan:\n  - name: a\n    request: {url: /}\n",
            "'new_conn_per_iter' must be true or false",
        ),
        (
            "rampup: soon\nplan:\n  - name: a\n    request: {url: /}\n",
            "'rampup' must be seconds or a duration",
        ),
        (
            "rampup: 1e300\nplan:\n  - name: a\n    request: {url: /}\n",
            "'rampup' must be seconds or a duration",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    tags: {a: b}\n",
            "'tags' must be a list",
        ),
        ("plan: {a: b}\n", "'plan' must be a list of items"),
        ("plan:\n  - just a string\n", "'plan item' must be a mapping"),
        (
            "plan:\n  - name: a\n    delay: {seconds: 1}\n    assign: x\n",
            "'assign' goes with 'request' or 'exec', or stands alone",
        ),
        (
            "plan:\n  - name: a\n    assert: {key: a, value: b}\n    with_items: [1]\n",
            "with_items goes with 'request'",
        ),
        (
            "plan:\n  - name: a\n    request:\n      url: /\n      body: {}\n",
            "'body' needs one of 'file', 'hex' or text",
        ),
        (
            "plan:\n  - name: a\n    request:\n      url: /\n      body: [1]\n",
            "'body' must be text, {file: PATH} or {hex: BYTES}",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    with_items: {a: 1}\n",
            "'with_items' must be a list",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    with_items_range: {start: 1}\n",
            "'with_items_range' needs 'stop'",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    with_items_from_csv: {quote_char: x}\n",
            "'with_items_from_csv' needs 'file_name'",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    with_items_from_csv: {file_name: f.csv, quote_char: é}\n",
            "'quote_char' must start with an ASCII character",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    with_items_from_csv: [f.csv]\n",
            "must be a file or {file_name, quote_char}",
        ),
        (
            "plan:\n  - name: a\n    request: {url: /}\n    with_items_range: {start: 0, stop: 100000000}\n",
            "more than 10,000,000",
        ),
        (
            "plan:\n  - name: a\n    assert: {key: '{{ x }}', value: b}\n",
            "not a variable reference",
        ),
        (
            "plan:\n  - name: a\n    request: {url: '/{{ x'}\n",
            "unclosed '{{'",
        ),
        (
            "plan:\n  - name: a\n    request: {url: '{{ base }}/x'}\n",
            "the file sets no 'base'",
        ),
        (
            "plan:\n  - name: a\n    assert: {key: nothing.status, value: 200}\n",
            "no earlier item assigns 'nothing'",
        ),
        (
            "plan:\n  - name: b\n    include: {file: x}\n",
            "'include' must be a single value",
        ),
    ];
    for (text, needle) in cases {
        let message = error_of(text);
        assert!(
            message.contains(needle),
            "for\n{text}\nexpected '{needle}' in: {message}"
        );
        assert!(message.contains("plan.yml"), "names the file: {message}");
    }
}

#[test]
fn tags_that_leave_nothing_and_missing_csv_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "plan.yml",
        "plan:\n  - name: a\n    request: {url: /}\n    tags: [x]\n",
    );
    let none = TagFilter {
        tags: vec!["y".into()],
        skip_tags: vec![],
    };
    assert!(
        load(&path, &none, None)
            .unwrap_err()
            .to_string()
            .contains("no plan item left to run")
    );
    let path = write(
        dir.path(),
        "csv.yml",
        "plan:\n  - name: a\n    request: {url: '/{{ item.id }}'}\n    with_items_from_csv: missing.csv\n",
    );
    assert!(
        load(&path, &TagFilter::default(), None)
            .unwrap_err()
            .to_string()
            .contains("cannot read the CSV file")
    );
    write(dir.path(), "bad-include.yml", "name: not a list\n");
    let path = write(
        dir.path(),
        "inc.yml",
        "plan:\n  - name: i\n    include: bad-include.yml\n",
    );
    let message = load(&path, &TagFilter::default(), None).unwrap_err().to_string();
    assert!(message.contains("must be a list of plan items"), "{message}");
}

#[test]
fn csv_with_a_quote_char_and_the_base_override() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "q.csv", "id,body\n1,'a,b'\n");
    let path = write(
        dir.path(),
        "plan.yml",
        "base: http://127.0.0.1:1\nplan:\n  - name: a\n    request: {url: '{{ base }}/{{ item.id }}', body: '{{ item.body }}'}\n    with_items_from_csv: {file_name: q.csv, quote_char: \"'\"}\n",
    );
    let s = load(&path, &TagFilter::default(), Some("http://127.0.0.1:2")).unwrap();
    let StepKind::Request(r) = &s.steps[0].kind else {
        panic!()
    };
    assert_eq!(r.items.as_ref().unwrap().values[0]["body"], "a,b");
    assert_eq!(s.settings.base.as_deref(), Some("http://127.0.0.1:2"));
    let url = r.url.as_static();
    assert_eq!(url, None, "item.id is filled per request");
}

#[test]
fn include_errors_name_the_included_file_and_cycles_stop() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "bad.yml",
        "- name: x\n  request:\n    url: /\n    verb: GET\n",
    );
    let path = write(
        dir.path(),
        "plan.yml",
        "plan:\n  - name: inc\n    include: bad.yml\n",
    );
    let message = load(&path, &TagFilter::default(), None).unwrap_err().to_string();
    assert!(message.contains("bad.yml:4: unsupported key 'verb'"), "{message}");
    write(dir.path(), "loop.yml", "- name: again\n  include: loop.yml\n");
    let path = write(
        dir.path(),
        "plan2.yml",
        "plan:\n  - name: inc\n    include: loop.yml\n",
    );
    assert!(
        load(&path, &TagFilter::default(), None)
            .unwrap_err()
            .to_string()
            .contains("a cycle")
    );
}

/// drill sends nothing for an item whose items are empty and skips CSV
/// rows its reader refuses: so does volley, with a warning for each.
#[test]
fn empty_items_and_bad_csv_rows_are_left_out_with_warnings() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "rows.csv", "txn\n'{\"a\": 1, \"b\": 2}'\nplain\n");
    let path = write(
        dir.path(),
        "plan.yml",
        "plan:\n  - name: none\n    request: {url: /}\n    with_items: []\n  - name: rows\n    request: {url: '/{{ item.txn }}'}\n    with_items_from_csv: {file_name: rows.csv, quote_char: \"\\\\'\"}\n",
    );
    let s = load(&path, &TagFilter::default(), None).unwrap();
    assert_eq!(s.stat_names, ["rows"]);
    let StepKind::Request(request) = &s.steps[0].kind else {
        panic!("a request step")
    };
    assert_eq!(request.items.as_ref().unwrap().values.len(), 1);
    assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
    assert!(
        s.warnings[0].contains("plan.yml:2: 'none' has no items"),
        "{:?}",
        s.warnings
    );
    assert!(s.warnings[1].contains("1 row(s) skipped"), "{:?}", s.warnings);
}
