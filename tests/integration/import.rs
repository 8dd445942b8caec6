//! `volley import` round trips: OpenAPI descriptions and a Postman
//! collection, imported, then run with `volley plan` against the embedded
//! target, whose request log must show exactly the requests the import
//! made (the description of `volley serve`'s own API answers 2xx to every
//! one); bad input of every kind is one line and exit 2, with nothing
//! written.

use super::support::{logging_target, num, stderr, volley, volley_env};
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
fn the_served_api_description_answers_2xx_to_every_request() {
    let server = logging_target();
    let base = format!("http://{}", server.addr());
    let dir = tempfile::tempdir().unwrap();
    let plan = import_to(
        dir.path(),
        &[
            "openapi",
            &repo("examples/openapi/volley-serve.yaml"),
            "--base",
            &base,
        ],
    );
    let report_path = dir.path().join("report.json");
    let out = volley_env(
        &[
            "plan",
            plan.to_str().unwrap(),
            "-q",
            "-o",
            report_path.to_str().unwrap(),
            "--status",
            "2xx",
        ],
        &[("VOLLEY_TOKEN", "tok-alice")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    for step in report["runs"][0]["steps"].as_array().unwrap() {
        assert_eq!(
            num(&step["summary"]["errors"]),
            0.0,
            "{} failed: {}",
            step["name"],
            step["summary"]["error_examples"]
        );
        assert_eq!(num(&step["summary"]["requests"]), 1.0, "{}", step["name"]);
    }
    let sent = server.requests();
    assert_eq!(
        targets(&sent),
        [
            "GET /hi",
            "GET /sleep/10",
            "GET /cpu/2",
            "GET /alloc/64",
            "GET /status/204",
            "GET /bytes/1024",
            "GET /slow/5",
            "POST /echo",
            "GET /stats",
            "GET /app",
            "POST /api/login",
            "GET /api/me",
            "GET /api/users?page=1",
            "POST /api/users",
            "GET /api/users/1",
            "PUT /api/echo-headers",
        ]
    );
    let body = |target: &str| {
        let r = sent.iter().find(|r| r.target == target).unwrap();
        String::from_utf8_lossy(&r.body).into_owned()
    };
    assert_eq!(body("/api/login"), r#"{"username":"alice","password":"secret"}"#);
    assert_eq!(
        body("/api/users"),
        r#"{"name":"ann","job":"tester"}"#,
        "allOf merged in order"
    );
    assert_eq!(body("/echo"), "echo: this");
    // Without the token the plan does not load: it says what to set.
    let out = volley(&["plan", plan.to_str().unwrap(), "-q"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("VOLLEY_TOKEN"), "{}", stderr(&out));
}

/// A large description whose requests the target mostly does not know:
/// every operation is still sent once, in the document's order.
fn round_trip(spec: &str, operations: usize, vars: &[(&str, &str)]) -> Vec<LoggedRequest> {
    let server = logging_target();
    let base = format!("http://{}", server.addr());
    let dir = tempfile::tempdir().unwrap();
    let plan = import_to(dir.path(), &["openapi", &repo(spec), "--base", &base]);
    let args = ["plan", plan.to_str().unwrap(), "-q", "--status", "2xx,4xx"];
    let out = volley_env(&args, vars);
    assert!(out.status.success(), "{}", stderr(&out));
    let sent = server.requests();
    assert_eq!(sent.len(), operations, "{:#?}", targets(&sent));
    let listed = volley(&["plan", plan.to_str().unwrap(), "--list-tasks"]);
    let names = String::from_utf8_lossy(&listed.stdout)
        .matches("\nname: ")
        .count();
    assert_eq!(names, operations);
    sent
}

#[test]
fn a_30_description_round_trips() {
    let sent = round_trip(
        "tests/fixtures/import/greenhouse-3.0.yaml",
        15,
        &[("GARDEN_AUTH", "t"), ("API_KEY", "k")],
    );
    // --base replaces the server, its /api/v2 too.
    assert_eq!(
        targets(&sent[..3]),
        [
            "GET /beds?state=fallow",
            "POST /beds",
            "GET /beds/search?crop=basil&crop=chard"
        ]
    );
    assert_eq!(targets(&sent[14..]), ["POST /crew/signout"]);
}

#[test]
fn a_large_31_description_round_trips() {
    let vars = [("BEARER_AUTH", "t"), ("API_KEY", "k"), ("BASIC_AUTH", "YTpi")];
    let sent = round_trip("tests/fixtures/import/bookshop-3.1.json", 25, &vars);
    assert!(
        targets(&sent).contains(&"GET /categories?key=k".to_string()),
        "the key from the environment"
    );
    let order = sent
        .iter()
        .find(|r| r.target == "/orders" && r.method == "POST")
        .unwrap();
    let order: serde_json::Value = serde_json::from_slice(&order.body).unwrap();
    assert_eq!(order["payment"]["kind"], "card");
}

#[test]
fn tags_pick_imported_operations_in_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let plan = import_to(
        dir.path(),
        &["openapi", &repo("tests/fixtures/import/greenhouse-3.0.yaml")],
    );
    let tags = volley(&["plan", plan.to_str().unwrap(), "--list-tags"]);
    assert!(String::from_utf8_lossy(&tags.stdout).contains(r#"["beds", "crew", "sensors"]"#));
    let store = volley(&[
        "plan",
        plan.to_str().unwrap(),
        "--list-tasks",
        "--tags",
        "sensors",
    ]);
    let listed = String::from_utf8_lossy(&store.stdout);
    for name in ["recordReadings", "sensorSummary", "getSensor", "dropCalibration"] {
        assert!(listed.contains(&format!("name: {name}\n")), "{listed}");
    }
    assert_eq!(listed.matches("\nname: ").count(), 4, "{listed}");
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
            "openapi",
            write(
                "x.yaml",
                "openapi: 3.0.0\nservers: [{url: 'http://h'}]\npaths:\n  /a:\n    get:\n      parameters: [{$ref: '#/nope'}]\n",
            ),
            "x.yaml: /paths/~1a/get/parameters/0/$ref: '#/nope' points nowhere",
        ),
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

#[test]
fn a_byte_order_mark_is_skipped_for_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let har = r#"{"log": {"entries": [{"request": {"method": "GET", "url": "http://h.test/a", "headers": []}, "response": {"status": 200}}]}}"#;
    let postman = r#"{"info": {"schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"}, "item": [{"name": "a", "request": {"method": "GET", "url": "http://h.test/a"}}]}"#;
    let openapi = "openapi: 3.0.0\nservers: [{url: 'http://h.test'}]\npaths:\n  /a:\n    get: {}\n";
    for (kind, text) in [
        ("har", har),
        ("postman", postman),
        ("curl", "curl http://h.test/a"),
        ("openapi", openapi),
    ] {
        let file = dir.path().join(format!("bom.{kind}"));
        std::fs::write(&file, format!("\u{feff}{text}")).unwrap();
        let out = volley(&["import", kind, file.to_str().unwrap()]);
        assert!(out.status.success(), "{kind}: {}", stderr(&out));
        let plan = String::from_utf8_lossy(&out.stdout);
        assert!(plan.contains("url: /a"), "{kind}: {plan}");
    }
}

type SecretCase<'a> = (&'a str, &'a str, &'a [&'a str], &'a [&'a str], &'a [&'a str]);

#[test]
fn imports_write_no_secret_unless_kept() {
    let dir = tempfile::tempdir().unwrap();
    let har = r#"{"log": {"entries": [{"request": {"method": "GET", "url": "http://h.test/a?api_key=k-123&page=2",
        "headers": [{"name": "Authorization", "value": "Bearer tok-456"}, {"name": "X-API-Key", "value": "k-789"},
        {"name": "Cookie", "value": "sid=s-000"}]}, "response": {"status": 200}}]}}"#;
    let curl =
        "curl http://h.test/a -H 'Proxy-Authorization: Basic cHc=' -b 'sid=s-000' -H 'X-Auth-Token: t-111'";
    // Per kind: the input, its flags, the secrets it holds, the variables.
    let cases: [SecretCase; 2] = [
        (
            "har",
            har,
            &["--keep-cookies"],
            &["tok-456", "k-123", "k-789", "s-000"],
            &["AUTHORIZATION", "API_KEY", "X_API_KEY", "COOKIE_SID"],
        ),
        (
            "curl",
            curl,
            &[],
            &["cHc=", "s-000", "t-111"],
            &["PROXY_AUTHORIZATION", "COOKIE_SID", "X_AUTH_TOKEN"],
        ),
    ];
    for (kind, text, flags, secrets, variables) in cases {
        let file = dir.path().join(format!("in.{kind}"));
        std::fs::write(&file, text).unwrap();
        let plan = dir.path().join(format!("{kind}.yml"));
        let args = [
            &[
                "import",
                kind,
                file.to_str().unwrap(),
                "-o",
                plan.to_str().unwrap(),
            ],
            flags,
        ]
        .concat();
        let out = volley(&args);
        assert!(out.status.success(), "{kind}: {}", stderr(&out));
        let written = std::fs::read_to_string(&plan).unwrap();
        for secret in secrets {
            assert!(!written.contains(secret), "{kind}: {secret} written:\n{written}");
        }
        for variable in variables {
            assert!(
                written.contains(&format!("{{{{ {variable} }}}}")),
                "{kind}: {variable}:\n{written}"
            );
            assert!(stderr(&out).contains(variable), "{kind}: {}", stderr(&out));
        }
        // The plan reads them when it runs: unset, it says which, and
        // sends nothing (its base is a loopback port nobody serves).
        let listed = volley(&["plan", plan.to_str().unwrap(), "-q"]);
        assert_eq!(listed.status.code(), Some(2), "{kind}: {}", stderr(&listed));
        assert!(
            variables.iter().any(|v| stderr(&listed).contains(v)),
            "{kind}: {}",
            stderr(&listed)
        );
        let kept = [&args[..], &["--keep-secrets"]].concat();
        assert!(volley(&kept).status.success());
        let written = std::fs::read_to_string(&plan).unwrap();
        for secret in secrets {
            assert!(
                written.contains(secret),
                "{kind}: --keep-secrets keeps {secret}:\n{written}"
            );
        }
    }
}
