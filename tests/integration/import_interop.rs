//! `volley import` against the real things on loopback: every request a
//! plan imported from an OpenAPI description (the project's own and public
//! ones) sends is checked by Prism's mock server (a validator written
//! independently of volley's), and curl
//! commands are replayed beside real curl, against one logging server.

use super::support::{logging_target, stderr, volley, volley_env};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use volley::server::LoggedRequest;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Prism's command, from `.ci/prism` (`VOLLEY_PRISM`); `None`, with a
/// note, where it is not installed.
fn prism() -> Option<PathBuf> {
    match std::env::var_os("VOLLEY_PRISM") {
        Some(path) => Some(PathBuf::from(path)),
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must check imported plans against Prism: .ci/run installs it"
            );
            eprintln!("note: no VOLLEY_PRISM (run .ci/prism); the Prism checks were skipped");
            None
        }
    }
}

/// A loopback port nobody listens on just now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `prism mock` of `description` on `port`, once it listens (at most
/// 60 s), with the lines it printed so far; killed when dropped.
struct Mock {
    child: Child,
    log: std::sync::mpsc::Receiver<String>,
}

impl Mock {
    fn start(prism: &Path, description: &Path, port: u16) -> Mock {
        let mut child = Command::new(prism)
            .args(["mock", "--host", "127.0.0.1", "--port", &port.to_string()])
            .arg(description)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("prism starts");
        let (tx, log) = std::sync::mpsc::channel();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
        }
        let mock = Mock { child, log };
        let began = Instant::now();
        loop {
            let left = Duration::from_secs(60).saturating_sub(began.elapsed());
            match mock.log.recv_timeout(left) {
                Ok(line) if line.contains("Prism is listening") => return mock,
                Ok(_) => {}
                Err(_) => panic!("prism mock of {} did not start in 60 s", description.display()),
            }
        }
    }

    /// Everything it printed up to now, once each request it received has
    /// its verdict (passed, or invalid) among them, or after 10 s: Prism
    /// logs a verdict after the response is sent, so on a loaded machine
    /// the last one can still be on its way when the plan has ended.
    fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.log.try_iter().collect();
        let count = |lines: &[String], what: &str| lines.iter().filter(|l| l.contains(what)).count();
        let began = Instant::now();
        while count(&lines, "passed the validation rules") + count(&lines, "Invalid request")
            < count(&lines, "Request received")
        {
            let left = Duration::from_secs(10).saturating_sub(began.elapsed());
            match self.log.recv_timeout(left) {
                Ok(line) => lines.push(line),
                Err(_) => break,
            }
        }
        lines
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The variables an import said its plan reads (its stderr's line "...
/// set them before running it: A, B").
fn variables(import_stderr: &str) -> Vec<String> {
    import_stderr
        .lines()
        .filter_map(|line| line.split_once("set them before running it: "))
        .flat_map(|(_, names)| {
            names
                .split(", ")
                .map(|n| n.trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Each of the project's OpenAPI descriptions, imported and run once
/// through its plan against `prism mock` of the same description: Prism
/// checks each request (path and query parameters, headers, security,
/// the body against its schema) before it answers. One operation of the
/// bookshop description gives an example that breaks its own pattern
/// (`lineId`: "line a/b" against `^[a-z]+$`, there to test escaping): its
/// request alone is refused, as the description asks.
#[test]
fn every_imported_request_passes_prisms_validation() {
    let Some(prism) = prism() else { return };
    for (name, refused) in [
        ("bookshop-3.1.json", &["/cart/items/line%20a%2Fb"][..]),
        ("greenhouse-3.0.yaml", &[]),
        ("forms-3.1.yaml", &[]),
        ("polymorphic-3.0.yaml", &[]),
    ] {
        replay_against_prism(&prism, &repo(&format!("tests/fixtures/import/{name}")), refused);
    }
}

/// Public descriptions as their authors published them (npm's
/// `@readme/oas-examples`, which `.ci/prism` installs beside Prism): the
/// Petstore (3.0 and 3.1), the USPTO's data set API, and descriptions of
/// security schemes, forms, file uploads, examples, schema types,
/// polymorphism and discriminators. Left out: those whose callbacks Prism
/// would call off this machine. Refused,
/// as Prism refuses them whoever sends them: an array of files (Prism does
/// not read repeated parts as an array; curl's repeated `-F` is refused
/// alike), the schema types' `allOf`s of a string and an integer, and the
/// `oneOf`s of options that accept the same values (two plain strings, two
/// options with nothing but a description, two `$ref`s to one base), which
/// no value satisfies.
#[test]
fn public_descriptions_replay_through_prisms_validation() {
    let Some(prism) = prism() else { return };
    let examples = prism
        .ancestors()
        .nth(2)
        .expect("prism lies in node_modules/.bin")
        .join("@readme/oas-examples");
    let quirks = "/anything/quirks/polymorphism";
    for (name, refused) in [
        ("3.0/json/petstore.json", &[][..]),
        ("3.1/json/petstore.json", &[]),
        ("3.0/json/petstore-expanded.json", &[]),
        ("3.0/json/uspto.json", &[]),
        ("3.0/json/security.json", &[]),
        ("3.0/json/form-data.json", &[]),
        ("3.0/json/parameters-common.json", &[]),
        ("3.0/json/request-examples.json", &[]),
        (
            "3.0/json/file-uploads.json",
            &["put /anything/multipart-formdata"],
        ),
        ("3.0/json/schema-types.json", &[quirks, quirks, quirks]),
        (
            "3.0/json/polymorphism.json",
            &["/anything/nested-one-of-ref", "/one-of-with-type"],
        ),
        (
            "3.0/json/discriminators.json",
            &["/potentially-undefined-formData"],
        ),
    ] {
        replay_against_prism(&prism, &examples.join(name), refused);
    }
}

/// Imports `description`, runs its plan once against `prism mock` of it,
/// and checks Prism's verdicts: every request passed its validation but
/// one per entry of `refused`, each a line of Prism's log naming it as
/// invalid.
fn replay_against_prism(prism: &Path, description: &Path, refused: &[&str]) {
    let name = description.display();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mock = Mock::start(prism, description, port);
    let plan = dir.path().join("plan.yml");
    let base = format!("http://127.0.0.1:{port}");
    let out = volley(&[
        "import",
        "openapi",
        description.to_str().unwrap(),
        "--base",
        &base,
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{name}: {}", stderr(&out));
    let names = variables(&stderr(&out));
    let values: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "dGVzdDp0ZXN0")).collect();
    let report = dir.path().join("report.json");
    let ran = volley_env(
        &[
            "plan",
            plan.to_str().unwrap(),
            "-q",
            "-o",
            report.to_str().unwrap(),
        ],
        &values,
    );
    assert!(
        ran.status.code().is_some_and(|c| c <= 1),
        "{name}: {}",
        stderr(&ran)
    );
    // Prism's log: each request, then its validator's verdict.
    let lines = mock.lines();
    let received = lines.iter().filter(|l| l.contains("Request received")).count();
    let failed: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("[VALIDATOR]") && l.contains("error"))
        .collect();
    let passed = lines
        .iter()
        .filter(|l| l.contains("passed the validation rules"))
        .count();
    assert!(received >= 1, "{name}: Prism saw no request");
    assert_eq!(
        passed + refused.len(),
        received,
        "{name}: requests Prism refused:\n{}",
        failed.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("\n")
    );
    let invalid: Vec<&String> = lines.iter().filter(|l| l.contains("Invalid request")).collect();
    assert_eq!(invalid.len(), refused.len(), "{name}: {invalid:#?}");
    for path in refused {
        assert!(
            invalid.iter().any(|l| l.contains(path)),
            "{name}: {path} was expected to be refused"
        );
    }
}

/// The requests as the logging server received them: method, target, and
/// the body with a multipart boundary (each client picks its own) read as
/// `BOUNDARY`.
fn received(requests: &[LoggedRequest]) -> Vec<(String, String, String)> {
    requests
        .iter()
        .map(|r| {
            let body = String::from_utf8_lossy(&r.body).into_owned();
            let body = match body.strip_prefix("--").and_then(|rest| rest.split("\r\n").next()) {
                Some(boundary) if !boundary.is_empty() => body.replace(boundary, "BOUNDARY"),
                _ => body,
            };
            (r.method.clone(), r.target.clone(), body)
        })
        .collect()
}

/// curl commands as API documentation writes them (a key in a shell
/// variable, a form with a file, a JSON body, a query string), run by real
/// curl through the shell and, imported, by `volley plan`, against one
/// logging server (its echo endpoint, which answers each 200, so the
/// plan's run is a clean one): the same methods, targets and bodies
/// arrive.
#[test]
fn curl_commands_replay_as_real_curl_sends_them() {
    if Command::new("curl").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must replay curl commands beside curl: .ci/run installs it"
        );
        eprintln!("note: no curl on PATH; the curl comparison was skipped");
        return;
    }
    let server = logging_target();
    let dir = tempfile::tempdir().unwrap();
    let upload = dir.path().join("notes.txt");
    std::fs::write(&upload, "line one\nline two\n").unwrap();
    let url = format!("http://{}", server.addr());
    let upload = upload.display();
    let commands = [
        format!("curl \"{url}/echo?api_key=$API_KEY&page=2\""),
        format!(
            "curl -X POST {url}/echo?form -F name=volley -F 'count=3' -F 'notes=@{upload};type=text/plain'"
        ),
        format!(
            "curl {url}/echo?order -H 'Content-Type: application/json' --data '{{\"item\":\"book\",\"n\":2}}'"
        ),
        format!("curl {url}/echo --data-urlencode 'q=two words' -G"),
        "curl -X PUT \"${BASE_URL}/echo?note=7\" -d 'text=hello'".to_string(),
    ];
    let env = [("API_KEY", "k-123"), ("BASE_URL", url.as_str())];
    for command in &commands {
        let out = Command::new("bash")
            .args(["-c", &format!("{command} -s -o /dev/null")])
            .envs(env)
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let by_curl = received(&server.requests());
    assert_eq!(by_curl.len(), commands.len());
    let script = dir.path().join("api.sh");
    std::fs::write(&script, commands.join("\n") + "\n").unwrap();
    let plan = dir.path().join("api.yml");
    let out = volley(&[
        "import",
        "curl",
        script.to_str().unwrap(),
        "--base",
        &url,
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written = std::fs::read_to_string(&plan).unwrap();
    assert!(!written.contains("k-123"), "no key in the plan:\n{written}");
    let ran = volley_env(&["plan", plan.to_str().unwrap(), "-q"], &env);
    assert!(ran.status.success(), "{}", stderr(&ran));
    let by_volley = received(&server.requests()[by_curl.len()..]);
    assert_eq!(by_volley, by_curl, "the plan:\n{written}");
}
