//! `volley import` measured against the real thing: browsers browse the
//! embedded target's /app page, whose script calls the JSON API, and
//! their own tools write down the session: Debian's chromium, driven by
//! Playwright (tests/browser/record_har.py), records it as HAR; Firefox's
//! devtools export it as HAR (tests/browser/record_har_firefox.py); and
//! Chromium's DevTools copy it as curl command lines ("Copy all as cURL",
//! tests/browser/copy_as_curl.py). The plan imported from each is then run
//! against the same server, and the server's own request log must show the
//! same requests (method, target and body) in the same order as when the
//! browser sent them.

use super::html::browser_python;
use super::support::{exclusive, logging_target, num, stderr, stdout, volley, volley_json_env};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::RwLockWriteGuard;
use tempfile::TempDir;
use volley::server::{LoggedRequest, ServerHandle};
use yaml_rust2::Yaml;

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

/// A browser's session of /app, as a script of tests/browser had the
/// browser's tools write it down.
struct Session {
    /// A browser loads the machine hard: held for the whole test.
    _exclusive: RwLockWriteGuard<'static, ()>,
    server: ServerHandle,
    dir: TempDir,
    /// Where the script had it written.
    out: PathBuf,
    /// The JSON line the script printed.
    report: Value,
    /// The requests the server saw meanwhile.
    browsed: Vec<LoggedRequest>,
}

/// Runs `script`, which has a browser browse /app and its tools write the
/// session to `out` in a temporary folder; checks the page's script made
/// its calls. None where the browser checks are skipped.
fn browse(script: &str, out: &str) -> Option<Session> {
    let exclusive = exclusive();
    let python = browser_python()?;
    let server = logging_target();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(out);
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/browser")
        .join(script);
    let run = Command::new(python)
        .arg(&script)
        .arg(format!("http://{}", server.addr()))
        .arg(&out)
        .output()
        .expect("python runs");
    let printed = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{} failed:\n{printed}\n{}",
        script.display(),
        String::from_utf8_lossy(&run.stderr)
    );
    let line = printed.lines().last().unwrap_or_default();
    let report = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {printed}"));
    let browsed = server.requests();
    let api: Vec<(&str, &str)> = browsed
        .iter()
        .filter(|r| r.target.starts_with("/api/"))
        .map(|r| (r.method.as_str(), r.target.as_str()))
        .collect();
    assert_eq!(api, API_CALLS, "the page's script made its calls");
    Some(Session {
        _exclusive: exclusive,
        server,
        dir,
        out,
        report,
        browsed,
    })
}

/// Firefox for the HAR check: $VOLLEY_FIREFOX, else Debian's firefox-esr
/// (.ci/run installs it). Off CI, without it, the check is skipped.
fn firefox() -> bool {
    let firefox = std::env::var_os("VOLLEY_FIREFOX").unwrap_or_else(|| "/usr/bin/firefox-esr".into());
    if Path::new(&firefox).exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must check a HAR Firefox wrote: .ci/run installs firefox-esr"
    );
    eprintln!("note: no Firefox ({firefox:?}); the Firefox HAR check was skipped");
    false
}

/// What a HAR replays of `browsed`: everything but the stylesheet and the
/// browser's favicon, which the importer leaves out as assets.
fn without_assets(browsed: &[LoggedRequest]) -> Vec<LoggedRequest> {
    browsed
        .iter()
        .filter(|r| r.target != "/app.css" && r.target != "/favicon.ico")
        .cloned()
        .collect()
}

/// Runs `plan` once against `server` (cleanly: every step 2xx, or as
/// listed in `failing`), with the variables it reads set to the
/// credentials the browser recorded; returns the requests the server saw
/// it send.
fn replay(server: &ServerHandle, plan: &Imported, failing: &[&str]) -> Vec<LoggedRequest> {
    let before = server.requests().len();
    let vars: Vec<(&str, &str)> = plan
        .secrets
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let (out, report) = volley_json_env(&["plan", plan.path.to_str().unwrap(), "-q"], &vars);
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

/// A plan `volley import` wrote, and what its variables stand for.
struct Imported {
    path: PathBuf,
    /// Per variable the plan reads instead of a recorded credential: its
    /// name and the value the browser recorded.
    secrets: Vec<(String, String)>,
}

/// Imports `file` of `kind` into `plan` as a user would, credentials
/// becoming references to environment variables; checks that the plan's
/// header names each and that no recorded value is written. The values
/// are read from the same import made with `--keep-secrets`.
fn import(kind: &str, file: &Path, plan: &Path) -> Imported {
    // Beside it, in a folder of its own: the bodies it writes to files
    // are then named as the plan's.
    let kept_dir = plan.parent().unwrap().join("kept");
    std::fs::create_dir_all(&kept_dir).unwrap();
    let kept = kept_dir.join(plan.file_name().unwrap());
    for (path, extra) in [(plan, None), (kept.as_path(), Some("--keep-secrets"))] {
        let mut args = vec![
            "import",
            kind,
            file.to_str().unwrap(),
            "-o",
            path.to_str().unwrap(),
        ];
        args.extend(extra);
        let out = volley(&args);
        assert!(out.status.success(), "volley {args:?}: {}", stderr(&out));
    }
    let text = std::fs::read_to_string(plan).unwrap();
    let kept = std::fs::read_to_string(&kept).unwrap();
    let load = |text: &str| yaml_rust2::YamlLoader::load_from_str(text).expect("the plan parses");
    let mut secrets = Vec::new();
    for (written, recorded) in load(&text).iter().zip(&load(&kept)) {
        recorded_values(written, recorded, &mut secrets);
    }
    for (name, value) in &secrets {
        assert!(
            text.contains(&format!("{name} (the ")),
            "{name} is not listed:\n{text}"
        );
        assert!(!text.contains(value.as_str()), "'{value}' was written:\n{text}");
    }
    Imported {
        path: plan.to_path_buf(),
        secrets,
    }
}

/// The credential the server gave the page (a session cookie, a bearer
/// token), which the browser sent on, is read from the variable `name`.
fn assert_read(imported: &Imported, name: &str, prefix: &str) {
    assert!(
        imported
            .secrets
            .iter()
            .any(|(var, value)| var == name && value.starts_with(prefix)),
        "{:?}",
        imported.secrets
    );
}

/// Walks a plan and the same plan with its secrets kept side by side:
/// where a string of `written` holds `{{ NAME }}`s and the one of
/// `recorded` values instead, each (NAME, value) is added to `found`.
fn recorded_values(written: &Yaml, recorded: &Yaml, found: &mut Vec<(String, String)>) {
    match (written, recorded) {
        (Yaml::Array(written), Yaml::Array(recorded)) => {
            assert_eq!(written.len(), recorded.len());
            for (w, r) in written.iter().zip(recorded) {
                recorded_values(w, r, found);
            }
        }
        (Yaml::Hash(written), Yaml::Hash(recorded)) => {
            assert_eq!(written.len(), recorded.len());
            for ((_, w), (_, r)) in written.iter().zip(recorded) {
                recorded_values(w, r, found);
            }
        }
        (Yaml::String(written), Yaml::String(recorded)) if written != recorded => {
            substituted(written, recorded, found)
        }
        _ => {}
    }
}

/// The values `recorded` holds where `written` holds `{{ NAME }}`s, the
/// text around them being the same in both.
fn substituted(written: &str, recorded: &str, found: &mut Vec<(String, String)>) {
    let mismatch = || format!("'{written}' against '{recorded}'");
    let (mut written_rest, mut recorded_rest) = (written, recorded);
    while let Some(start) = written_rest.find("{{ ") {
        let literal = &written_rest[..start];
        assert!(recorded_rest.starts_with(literal), "{}", mismatch());
        recorded_rest = &recorded_rest[literal.len()..];
        let end = start + written_rest[start..].find(" }}").expect("a closed reference");
        let name = written_rest[start + 3..end].to_string();
        written_rest = &written_rest[end + 3..];
        // An importer's own placeholder stands in both.
        let reference = format!("{{{{ {name} }}}}");
        if let Some(rest) = recorded_rest.strip_prefix(&reference) {
            recorded_rest = rest;
            continue;
        }
        let after = &written_rest[..written_rest.find("{{ ").unwrap_or(written_rest.len())];
        let value_len = match after {
            "" => recorded_rest.len(),
            after => recorded_rest
                .find(after)
                .unwrap_or_else(|| panic!("{}", mismatch())),
        };
        let value = recorded_rest[..value_len].to_string();
        recorded_rest = &recorded_rest[value_len..];
        if !found.iter().any(|(known, _)| *known == name) {
            found.push((name, value));
        }
    }
    assert_eq!(written_rest, recorded_rest, "{}", mismatch());
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
    let Some(session) = browse("record_har.py", "session.har") else {
        return;
    };
    let plan = session.dir.path().join("plan.yml");
    let imported = import("har", &session.out, &plan);
    // The cookie is left to the cookie jar; the bearer token is read.
    assert_read(&imported, "AUTHORIZATION", "tok-");
    let replayed = replay(&session.server, &imported, &[]);
    assert_eq!(seen(&replayed), seen(&without_assets(&session.browsed)));
    let text = std::fs::read_to_string(&plan).unwrap();
    assert!(
        text.contains("request(s) for images, fonts, stylesheets and scripts"),
        "{text}"
    );
    assert!(
        session.dir.path().join("plan.bodies").is_dir(),
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
}

#[test]
fn a_har_firefox_wrote_replays_as_the_browser_sent_it() {
    if !firefox() {
        return;
    }
    let Some(session) = browse("record_har_firefox.py", "hars") else {
        return;
    };
    // Firefox's devtools write a HAR a page load: each is imported and run
    // on its own, in the order the pages were loaded.
    let hars = session.report["hars"].as_array().expect("the HAR files");
    assert_eq!(hars.len(), 2, "{}", session.report);
    let mut replayed = Vec::new();
    for (n, har) in hars.iter().enumerate() {
        let plan = session.dir.path().join(format!("page-{n}.yml"));
        let imported = import("har", Path::new(har.as_str().unwrap()), &plan);
        let text = std::fs::read_to_string(&plan).unwrap();
        assert!(text.contains("(HAR by Firefox "), "{text}");
        replayed.extend(replay(&session.server, &imported, &[]));
    }
    assert_eq!(seen(&replayed), seen(&without_assets(&session.browsed)));
}

#[test]
fn chromiums_copy_all_as_curl_replays_as_the_browser_sent_it() {
    let Some(session) = browse("copy_as_curl.py", "copied.sh") else {
        return;
    };
    let plan = session.dir.path().join("curl.yml");
    let imported = import("curl", &session.out, &plan);
    assert_read(&imported, "COOKIE_SESSION", "sess-");
    // Everything DevTools recorded was copied, assets too (the favicon is
    // a 404 to replay): what the server saw of those URLs comes again.
    let recorded: Vec<&str> = session.report["recorded"]
        .as_array()
        .expect("the URLs DevTools recorded")
        .iter()
        .flat_map(|page| page.as_array().unwrap())
        .map(|url| url.as_str().unwrap())
        .collect();
    let expected: Vec<LoggedRequest> = session
        .browsed
        .iter()
        .filter(|r| recorded.iter().any(|url| url.ends_with(&r.target)))
        .cloned()
        .collect();
    let replayed = replay(&session.server, &imported, &["GET /favicon.ico"]);
    // The favicon is the browser's own request, racing the page's script:
    // its place among them is not fixed, only that it comes again.
    let favicon = |r: &LoggedRequest| r.target == "/favicon.ico";
    let (icons, replayed): (Vec<_>, Vec<_>) = replayed.into_iter().partition(favicon);
    let (icons_sent, expected): (Vec<_>, Vec<_>) = expected.into_iter().partition(favicon);
    assert_eq!(seen(&replayed), seen(&expected));
    assert_eq!(seen(&icons), seen(&icons_sent));
}
