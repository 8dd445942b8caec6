//! `volley import` round trips: a Postman collection, imported, then run
//! with `volley plan` against the embedded target, whose request log must
//! show exactly the requests the import made; bad input of every kind is
//! one line and exit 2, with nothing written.

use super::support::{logging_target, stderr, volley, volley_env};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use volley::server::LoggedRequest;

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .display()
        .to_string()
}

fn import_to(dir: &Path, args: &[&str]) -> PathBuf {
    let plan = dir.join("plan.yml");
    let out = volley(&[&["import"], args, &["-o", plan.to_str().unwrap()]].concat());
    assert!(out.status.success(), "volley import {args:?}: {}", stderr(&out));
    plan
}

fn targets(requests: &[LoggedRequest]) -> Vec<String> {
    requests
        .iter()
        .map(|r| format!("{} {}", r.method, r.target))
        .collect()
}

#[test]
fn bad_input_is_one_line_exit_2_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let cases = [
        (
            "har",
            write("x.har", "{\"log\": {\"entries\": [{\"request\": {}}]}}"),
            "x.har: /log/entries/0/request: 'url' is missing",
        ),
        ("har", write("y.har", "<html>"), "y.har: line 1: not valid JSON"),
        (
            "curl",
            write("x.sh", "curl -L http://h/a\ncurl --proxy p http://h/b\n"),
            "x.sh: line 2: curl option '--proxy' is not supported",
        ),
        (
            "postman",
            write("x.json", "{\"item\": []}"),
            "x.json: /: not a Postman collection",
        ),
        (
            "har",
            dir.path().join("missing.har").display().to_string(),
            "missing.har: cannot read",
        ),
    ];
    for (kind, file, says) in cases {
        let plan = dir.path().join("plan.yml");
        let out = volley(&["import", kind, &file, "-o", plan.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{kind} {file}: {}", stderr(&out));
        let message = stderr(&out);
        assert_eq!(message.lines().count(), 1, "{message}");
        assert!(message.contains(says), "{message}");
        assert!(!plan.exists(), "nothing is written");
        assert!(
            std::fs::read_dir(dir.path()).unwrap().all(|e| !e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.'))
        );
    }
    let out = volley(&["import", "curl", "x.sh", "--think-time"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--think-time goes with 'volley import har'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn standard_input_in_standard_output_out() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["import", "curl", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"curl 'http://127.0.0.1:9/a' --data-binary $'\\x00\\x01'")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plan = String::from_utf8(out.stdout).unwrap();
    assert!(plan.contains("from <stdin>"), "{plan}");
    assert!(
        plan.contains("hex: 0001"),
        "binary bodies go inline as hex: {plan}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.yml");
    std::fs::write(&path, &plan).unwrap();
    let listed = volley(&["plan", path.to_str().unwrap(), "--list-tasks"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
}

#[test]
fn a_postman_collection_round_trips_against_the_target() {
    let server = logging_target();
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env.json");
    let env_text = format!(
        r#"{{"name": "test", "values": [{{"key": "baseUrl", "value": "http://{}", "enabled": true}}, {{"key": "password", "value": "secret", "enabled": true}}]}}"#,
        server.addr()
    );
    std::fs::write(&env, env_text).unwrap();
    let plan = import_to(
        dir.path(),
        &[
            "postman",
            &repo("tests/fixtures/import/serve.postman_collection.json"),
            "--env",
            env.to_str().unwrap(),
        ],
    );
    let vars = [("POSTMAN_TOKEN", "tok-bob"), ("POSTMAN_API_KEY", "k")];
    let out = volley_env(&["plan", plan.to_str().unwrap(), "-q", "--status", "2xx"], &vars);
    assert!(out.status.success(), "{}", stderr(&out));
    let sent = server.requests();
    let login = String::from_utf8_lossy(&sent[0].body).into_owned();
    assert_eq!(
        login, r#"{"username": "bob", "password": "secret"}"#,
        "the environment's password"
    );
    assert_eq!(
        targets(&sent),
        [
            "POST /api/login",
            "GET /api/me",
            "GET /api/users?page=2",
            "POST /api/echo-headers",
            "POST /echo",
            "POST /echo",
            "GET /hi"
        ]
    );
    let tags = volley(&["plan", plan.to_str().unwrap(), "--list-tags"]);
    assert!(String::from_utf8_lossy(&tags.stdout).contains(r#"["Admin", "Auth", "Users"]"#));
}
