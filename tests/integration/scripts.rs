//! `volley run -s` beyond what wrk does: a script's bad input gets one
//! line and exit 2, a script that fails mid-run stops it with its report,
//! and a script's requests go over HTTP/2 and HTTP/3, counted exactly with
//! `-n` and paced with `-R`.

use super::support::{logging_target, num, stderr, summary, volley, volley_json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use volley::server::{ServerOptions, spawn};

fn fixture(name: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "examples", "scripts", name]
        .iter()
        .collect();
    path.display().to_string()
}

/// Writes `text` as `name` in `dir`; its path.
fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Runs `volley run -s SCRIPT URL` (a dead port: nothing is sent) and
/// expects exit 2 with one line that contains `expected`.
fn refused(script: &str, expected: &str) {
    let started = Instant::now();
    let out = volley(&["run", "-d", "2s", "-s", script, "http://127.0.0.1:9/"]);
    assert_eq!(out.status.code(), Some(2), "{script}: {}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(expected), "{script}: {err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{script} took {:?}",
        started.elapsed()
    );
}

#[test]
fn bad_scripts_get_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let syntax = write(dir.path(), "syntax.lua", "local a = 1\nfunction (\n");
    refused(&syntax, "syntax.lua:2:");
    refused(
        &dir.path().join("none.lua").display().to_string(),
        "cannot read the script",
    );
    let not_request = write(dir.path(), "hello.lua", "function request() return 'hello' end\n");
    refused(&not_request, "request() returned incomplete request at 1:6");
    let table = write(dir.path(), "table.lua", "function request() return {} end\n");
    refused(&table, "request() returned a table");
    let failing_init = write(
        dir.path(),
        "init.lua",
        "function init(args)\n  error('no init')\nend\n",
    );
    refused(&failing_init, "init.lua:2: no init");
    // A loop that never returns is bounded by the run's length (2 s).
    let forever = write(
        dir.path(),
        "forever.lua",
        "function init(args) while true do end end\n",
    );
    refused(&forever, "did not finish its setup and init within 2s");
}

#[test]
fn a_script_that_fails_mid_run_stops_it_with_its_report() {
    let server = logging_target();
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "fails.lua",
        "sent = 0\nfunction request()\n  sent = sent + 1\n  if sent > 50 then error('out of ideas') end\n  return wrk.format()\nend\n",
    );
    let url = format!("http://{}/hi", server.addr());
    let started = Instant::now();
    let (out, report) = volley_json(&["run", "-t", "1", "-c", "1", "-d", "20s", "-s", &script, &url]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the run went on after the error"
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("fails.lua:4: out of ideas"),
        "{}",
        stderr(&out)
    );
    let sum = summary(&report);
    // The first call was wrk's reading of the request before the load:
    // 49 went out before the 51st call failed.
    assert_eq!(num(&sum["ok"]), 49.0, "{sum}");
    assert_eq!(num(&sum["errors_by_kind"]["script"]), 1.0, "{sum}");
    let example = sum["error_examples"]["script"].as_str().unwrap();
    assert!(
        example.starts_with("request(): ") && example.ends_with("fails.lua:4: out of ideas"),
        "{example}"
    );
    assert_eq!(server.requests().len(), 49);
}

#[test]
fn a_request_that_never_returns_is_bounded_by_the_runs_length() {
    let server = logging_target();
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "spins.lua",
        "sent = 0\nfunction request()\n  sent = sent + 1\n  while sent > 20 do end\n  return wrk.format()\nend\n",
    );
    let url = format!("http://{}/hi", server.addr());
    let started = Instant::now();
    let out = volley(&[
        "run",
        "-t",
        "1",
        "-c",
        "1",
        "-d",
        "1s",
        "--timeout",
        "1s",
        "-s",
        &script,
        &url,
    ]);
    // 1 s of load, a request timeout and 5 s of grace.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("did not return by the end of the run"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_pipelining_script_is_counted_exactly_over_h2c() {
    let server = logging_target();
    let url = format!("http://{}/hi", server.addr());
    let script = fixture("pipeline.lua");
    let (out, report) = volley_json(&[
        "run", "--http2", "-t", "1", "-c", "2", "-n", "300", "-s", &script, &url,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["runs"][0]["protocol"], "h2c");
    assert_eq!(num(&summary(&report)["ok"]), 300.0);
    let requests = server.requests();
    assert_eq!(requests.len(), 300);
    for name in ["one", "two", "three"] {
        let target = format!("/hi?{name}");
        assert_eq!(
            requests.iter().filter(|r| r.target == target).count(),
            100,
            "{target}"
        );
    }
}

#[test]
fn a_scripts_requests_and_responses_go_over_http3() {
    let server = spawn(ServerOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        tls: true,
        http3: true,
        log_requests: true,
        ..Default::default()
    })
    .expect("the HTTP/3 target starts");
    let url = format!("https://{}/hi", server.addr());
    // auth.lua reads the login's answer in response() and sends its token.
    let script = fixture("auth.lua");
    let args = [
        "run",
        "--http3",
        "--insecure",
        "-t",
        "1",
        "-c",
        "1",
        "-n",
        "40",
        "-s",
        &script,
        &url,
    ];
    let (out, report) = volley_json(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(report["runs"][0]["protocol"], "h3");
    assert_eq!(num(&summary(&report)["ok"]), 40.0, "{}", summary(&report));
    let requests = server.requests();
    assert_eq!(requests.len(), 40);
    assert_eq!(requests[0].target, "/api/login");
    assert!(
        requests[1..].iter().all(|r| r.target == "/api/me"),
        "{requests:?}"
    );
}

#[test]
fn a_script_keeps_an_open_models_rate() {
    let server = logging_target();
    let url = format!("http://{}/echo", server.addr());
    let script = fixture("counter.lua");
    let (out, report) = volley_json(&["run", "-R", "200", "-d", "2s", "-t", "1", "-s", &script, &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ok = num(&summary(&report)["ok"]);
    assert!((380.0..=420.0).contains(&ok), "{ok} requests at 200/s for 2 s");
    assert!(server.requests().iter().all(|r| r.target.starts_with("/echo?n=")));
}

#[test]
fn require_finds_a_module_on_lua_path() {
    let server = logging_target();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "paths.lua",
        "return { next = function(n) return '/echo?module=' .. n end }\n",
    );
    let script = write(
        dir.path(),
        "uses.lua",
        "local paths = require 'paths'\nlocal n = 0\nfunction request()\n  n = n + 1\n  return wrk.format(nil, paths.next(n))\nend\n",
    );
    let lua_path = format!("{}/?.lua;;", dir.path().display());
    let url = format!("http://{}/", server.addr());
    let out = super::support::volley_env(
        &["run", "-t", "1", "-c", "1", "-n", "5", "-s", &script, &url],
        &[("LUA_PATH", &lua_path)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let targets: Vec<String> = server.requests().iter().map(|r| r.target.clone()).collect();
    // As under wrk, request() is called once before the load (to learn the
    // pipelining depth): the load's five requests are its calls 2 to 6.
    assert_eq!(
        targets,
        (2..=6).map(|n| format!("/echo?module={n}")).collect::<Vec<_>>()
    );
}

#[test]
fn a_script_run_has_a_warmup_a_threshold_and_a_shard() {
    let server = logging_target();
    let url = format!("http://{}/echo", server.addr());
    let script = fixture("counter.lua");
    // Shard 1 (the second) of 2 of 100 requests after 10 of warm-up, with a threshold
    // that cannot hold: 50 measured after 5 of warm-up (each shard takes its
    // share of both), exit 3 for the failed threshold.
    let (out, report) = volley_json(&[
        "run",
        "-t",
        "1",
        "-c",
        "2",
        "-n",
        "100",
        "--warmup",
        "10",
        "--shard",
        "1/2",
        "--threshold",
        "p99<1us",
        "-s",
        &script,
        &url,
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(num(&summary(&report)["ok"]), 50.0);
    assert_eq!(server.requests().len(), 55);
    assert!(server.requests().iter().all(|r| r.target.starts_with("/echo?n=")));
}

#[test]
fn a_script_with_a_float_seed_ramps_over_tls() {
    // LuaJIT's (Lua 5.1's) math.randomseed takes a float, which Lua 5.4
    // refuses; real scripts seed with os.time() plus a fraction.
    let server = spawn(ServerOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        tls: true,
        log_requests: true,
        ..Default::default()
    })
    .expect("the TLS target starts");
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "random.lua",
        "math.randomseed(os.time() + 0.5)\nfunction request()\n  return wrk.format(nil, '/echo?id=' .. math.random(1, 1000))\nend\n",
    );
    let url = format!("https://{}/", server.addr());
    let (out, report) = volley_json(&[
        "run",
        "--insecure",
        "--http1.1",
        "-t",
        "1",
        "--stages",
        "1s:2,1s:2",
        "-s",
        &script,
        &url,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ok = num(&summary(&report)["ok"]);
    assert!(ok > 20.0, "{ok} requests in 2 s of stages");
    assert_eq!(num(&summary(&report)["errors"]), 0.0);
    let requests = server.requests();
    assert!(
        requests.iter().all(|r| r.target.starts_with("/echo?id=")),
        "{:?}",
        &requests[..requests.len().min(3)]
    );
    let distinct: std::collections::HashSet<&str> = requests.iter().map(|r| r.target.as_str()).collect();
    assert!(distinct.len() > 10, "{} distinct ids", distinct.len());
}
