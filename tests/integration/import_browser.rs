//! `volley import` measured against the real thing: Debian's chromium,
//! driven by Playwright (tests/browser/record_har.py), browses the
//! embedded target's /app page, whose script calls the JSON API, and
//! records the session as HAR. The plan imported from that HAR, and the
//! one imported from the curl command lines Chromium's "Copy as cURL"
//! writes for the same requests, are then run against the same server,
//! and the server's own request log must show the same requests (method,
//! target and body) in the same order as when the browser sent them.

use super::html::browser_python;
use super::support::{exclusive, logging_target, num, stderr, stdout, volley, volley_json};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use volley::server::{LoggedRequest, ServerHandle};

/// What a request log entry says, for comparing.
fn seen(requests: &[LoggedRequest]) -> Vec<(String, String, String)> {
    requests
        .iter()
        .map(|r| {
            (
                r.method.clone(),
                r.target.clone(),
                String::from_utf8_lossy(&r.body).into_owned(),
            )
        })
        .collect()
}

/// Records the browser's session of /app into `har`; returns the requests
/// the server saw while it did.
fn record(python: &Path, server: &ServerHandle, har: &Path) -> Vec<LoggedRequest> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/record_har.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(format!("http://{}", server.addr()))
        .arg(har)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "record_har.py failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    server.requests()
}

/// Runs `plan` once against `server` (cleanly: every step 2xx, or as
/// listed in `failing`); returns the requests the server saw it send.
fn replay(server: &ServerHandle, plan: &Path, failing: &[&str]) -> Vec<LoggedRequest> {
    let before = server.requests().len();
    let (out, report) = volley_json(&["plan", plan.to_str().unwrap(), "-q"]);
    assert!(out.status.success(), "{}", stderr(&out));
    for step in report["runs"][0]["steps"].as_array().expect("steps") {
        let name = step["name"].as_str().unwrap();
        let errors = num(&step["summary"]["errors"]);
        if !failing.contains(&name) {
            assert_eq!(
                errors, 0.0,
                "step '{name}' failed: {}",
                step["summary"]["error_examples"]
            );
        }
    }
    server.requests()[before..].to_vec()
}

fn import(args: &[&str]) {
    let out = volley(&[&["import"], args].concat());
    assert!(out.status.success(), "volley import {args:?}: {}", stderr(&out));
}

/// The API calls the page's script makes, in its order (what the test
/// expects the browser to have sent, so a broken page fails here too).
const API_CALLS: &[(&str, &str)] = &[
    ("POST", "/api/login"),
    ("GET", "/api/me"),
    ("GET", "/api/users?page=2&sort=name%20asc"),
    ("GET", "/api/users/7"),
    ("GET", "/api/me"),
    ("POST", "/api/users"),
    ("PUT", "/api/echo-headers"),
    ("GET", "/api/users/42"),
];

#[test]
fn a_chromium_session_replays_as_the_browser_sent_it() {
    let _exclusive = exclusive();
    let Some(python) = browser_python() else { return };
    let server = logging_target();
    let dir = tempfile::tempdir().unwrap();
    let har = dir.path().join("session.har");
    let browsed = record(&python, &server, &har);
    let api: Vec<(&str, &str)> = browsed
        .iter()
        .filter(|r| r.target.starts_with("/api/"))
        .map(|r| (r.method.as_str(), r.target.as_str()))
        .collect();
    assert_eq!(api, API_CALLS, "the page's script made its calls");

    // HAR: everything but the stylesheet and the browser's favicon.
    let plan = dir.path().join("plan.yml");
    import(&["har", har.to_str().unwrap(), "-o", plan.to_str().unwrap()]);
    let expected: Vec<LoggedRequest> = browsed
        .iter()
        .filter(|r| r.target != "/app.css" && r.target != "/favicon.ico")
        .cloned()
        .collect();
    let replayed = replay(&server, &plan, &[]);
    assert_eq!(seen(&replayed), seen(&expected));
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(
        text.contains("request(s) for images, fonts, stylesheets and scripts"),
        "{text}"
    );
    assert!(
        dir.path().join("plan.bodies").is_dir(),
        "the body holding '{{{{' went to a file"
    );

    // The pages are the tags; the items are named by method and path.
    let tags = volley(&["plan", plan.to_str().unwrap(), "--list-tags"]);
    assert!(
        stdout(&tags).contains(r#"["volley-shop", "volley-shop-one-user"]"#),
        "{}",
        stdout(&tags)
    );
    let tasks = volley(&[
        "plan",
        plan.to_str().unwrap(),
        "--list-tasks",
        "--tags",
        "volley-shop-one-user",
    ]);
    let listed = stdout(&tasks);
    assert!(listed.contains("name: GET /api/users/42"), "{listed}");
    assert!(!listed.contains("/api/login"), "{listed}");

    // curl: the command lines Chromium's "Copy all as cURL" writes for the
    // same requests, with the cookie as a header (as Chromium writes it)
    // or as -b (as later versions do).
    let session: Value = serde_json::from_str(&std::fs::read_to_string(&har).unwrap()).unwrap();
    let entries = session["log"]["entries"].as_array().unwrap();
    for cookies_as_b in [false, true] {
        let commands: Vec<String> = entries
            .iter()
            .map(|e| copy_as_curl(&e["request"], cookies_as_b))
            .collect();
        let curl = dir.path().join("copied.sh");
        std::fs::write(&curl, commands.join(" ;\n")).unwrap();
        let plan = dir.path().join("curl.yml");
        import(&["curl", curl.to_str().unwrap(), "-o", plan.to_str().unwrap()]);
        let all: Vec<LoggedRequest> = browsed
            .iter()
            .filter(|r| {
                entries
                    .iter()
                    .any(|e| e["request"]["url"].as_str().unwrap().ends_with(&r.target))
            })
            .cloned()
            .collect();
        let replayed = replay(&server, &plan, &["GET /favicon.ico"]);
        assert_eq!(seen(&replayed), seen(&all), "cookies as -b: {cookies_as_b}");
    }
}

/// A request as Chromium's devtools copy it as a bash curl command line
/// (NetworkLogView's generateCurlCommand, rewritten here from its
/// documented behaviour): every argument single-quoted, or ANSI-C quoted
/// (`$'...'`) when it holds a quote, a control character or a `!`; the
/// URL's brackets and braces escaped for curl's globbing; the body as
/// `--data-raw`; `-X` only when the method is not the one curl infers;
/// pseudo-headers, Host and Accept-Encoding left out; a header without a
/// value written `Name;`.
fn copy_as_curl(request: &Value, cookies_as_b: bool) -> String {
    fn escape(text: &str) -> String {
        let needs_ansi_c = text
            .chars()
            .any(|c| c == '\'' || c == '!' || (c as u32) < 0x20 || (0x7f..=0x9f).contains(&(c as u32)));
        if !needs_ansi_c {
            return format!("'{text}'");
        }
        let mut out = String::from("$'");
        for c in text.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c == '!' || (c as u32) < 0x20 || (0x7f..=0x9f).contains(&(c as u32)) => {
                    out.push_str(&format!("\\u{:04x}", c as u32))
                }
                c => out.push(c),
            }
        }
        out.push('\'');
        out
    }
    let mut ignored = vec![
        "accept-encoding",
        "host",
        "method",
        "path",
        "scheme",
        "version",
        "authority",
        "protocol",
    ];
    let mut command = Vec::new();
    let url = escape(request["url"].as_str().unwrap());
    let mut escaped = String::new();
    for c in url.chars() {
        if "[]{}".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    command.push(escaped);
    let mut inferred = "GET";
    let mut data = Vec::new();
    if let Some(text) = request["postData"]["text"].as_str().filter(|t| !t.is_empty()) {
        data.push(format!("--data-raw {}", escape(text)));
        ignored.push("content-length");
        inferred = "POST";
    }
    let method = request["method"].as_str().unwrap();
    if method != inferred {
        command.push(format!("-X {}", escape(method)));
    }
    for header in request["headers"].as_array().unwrap() {
        let name = header["name"].as_str().unwrap().trim_start_matches(':');
        let value = header["value"].as_str().unwrap();
        if ignored.contains(&name.to_ascii_lowercase().as_str()) {
            continue;
        }
        if value.trim().is_empty() {
            command.push(format!("-H {}", escape(&format!("{name};"))));
        } else if cookies_as_b && name.eq_ignore_ascii_case("cookie") {
            command.push(format!("-b {}", escape(value)));
        } else {
            command.push(format!("-H {}", escape(&format!("{name}: {value}"))));
        }
    }
    command.extend(data);
    let separator = if command.len() >= 3 { " \\\n  " } else { " " };
    format!("curl {}", command.join(separator))
}
