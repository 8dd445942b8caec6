//! wrk's Lua scripts run unchanged under `volley run -s`. Each script in
//! examples/scripts (our own, each using a part of wrk's API as wrk's
//! example scripts do) runs under Debian's wrk and under volley, each
//! against its own logging target on loopback: the same kinds of request
//! (method, path, header names, body; numbers masked) must reach the
//! server in the same proportions, and the script must print the same
//! lines.

use super::support::{logging_target, stderr, stdout, volley};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use volley::server::LoggedRequest;

fn wrk_installed() -> bool {
    let found = Command::new("wrk")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the scripts under the real wrk (.ci/run installs Debian's wrk)"
        );
        eprintln!("note: wrk is not installed (apt-get install wrk); the comparison was skipped");
    }
    found
}

fn script(name: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "examples", "scripts", name]
        .iter()
        .collect();
    path.display().to_string()
}

/// Runs of digits as `N`: counters, ports and timings differ run to run.
fn masked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('N') {
                out.push('N');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A request as the comparison sees it. Header names are sorted: scripts
/// build headers from Lua tables, whose `pairs` order differs between
/// LuaJIT builds and even between two states of one.
fn kind(request: &LoggedRequest) -> String {
    let mut names = request.header_names.clone();
    names.sort();
    format!(
        "{} {} [{}] {}",
        request.method,
        masked(&request.target),
        names.join(","),
        masked(&String::from_utf8_lossy(&request.body))
    )
}

/// What one tool did with a script: the requests' kinds and counts, and
/// the lines it printed (masked) that start as one of `printed` does.
#[derive(Debug)]
struct Seen {
    kinds: BTreeMap<String, usize>,
    total: usize,
    lines: Vec<String>,
}

/// Runs `name` under `tool` ("wrk" or "volley") with 2 threads, 4
/// connections, for 1 s, against a fresh logging target at `/hi`.
fn seen(tool: &str, name: &str, args: &[&str], printed: &[&str]) -> Seen {
    let server = logging_target();
    let url = format!("http://{}/hi", server.addr());
    let path = script(name);
    let mut flags = vec![
        "-t",
        "2",
        "-c",
        "4",
        "-d",
        "1s",
        "-s",
        path.as_str(),
        url.as_str(),
    ];
    let out = if tool == "wrk" {
        flags.extend_from_slice(args);
        let out = Command::new("timeout")
            .args(["20", "wrk"])
            .args(&flags)
            .output()
            .expect("wrk runs");
        assert!(out.status.success(), "wrk: {}", stderr(&out));
        out
    } else {
        let mut flags = [&["run"][..], &flags, &["--"][..], args].concat();
        if args.is_empty() {
            flags.pop();
        }
        let out = volley(&flags);
        assert!(out.status.success(), "volley: {}", stderr(&out));
        out
    };
    let mut kinds = BTreeMap::new();
    let requests = server.requests();
    for request in &requests {
        *kinds.entry(kind(request)).or_insert(0) += 1;
    }
    let lines = stdout(&out)
        .lines()
        .map(masked)
        .filter(|line| printed.iter().any(|p| line.starts_with(p)))
        .collect::<Vec<_>>();
    Seen {
        kinds,
        total: requests.len(),
        lines,
    }
}

/// Runs `name` under both and compares: the same kinds, each within 5
/// points of the same share, and the same printed lines (in order, once
/// masked). Returns both, for a script's own checks.
fn same_under_both(name: &str, args: &[&str], printed: &[&str]) -> Option<(Seen, Seen)> {
    if !wrk_installed() {
        return None;
    }
    let wrk = seen("wrk", name, args, printed);
    let volley = seen("volley", name, args, printed);
    assert!(
        wrk.total > 0 && volley.total > 0,
        "{name}: wrk {wrk:?}\nvolley {volley:?}"
    );
    assert_eq!(
        wrk.kinds.keys().collect::<Vec<_>>(),
        volley.kinds.keys().collect::<Vec<_>>(),
        "{name}: different requests reached the server"
    );
    for (key, &count) in &wrk.kinds {
        let share = |n: usize, total: usize| n as f64 / total as f64;
        let (w, v) = (share(count, wrk.total), share(volley.kinds[key], volley.total));
        assert!(
            (w - v).abs() < 0.05,
            "{name}: '{key}' is {w:.3} of wrk's requests, {v:.3} of volley's"
        );
    }
    let (mut w, mut v) = (wrk.lines.clone(), volley.lines.clone());
    // Threads print in the order they run: the lines, not their order.
    w.sort();
    v.sort();
    assert_eq!(w, v, "{name}: the script printed different lines");
    Some((wrk, volley))
}

#[test]
fn a_post_script_sends_its_method_body_and_header() {
    let Some((_, volley)) = same_under_both("post.lua", &[], &[]) else {
        return;
    };
    let only = volley.kinds.keys().next().unwrap();
    assert_eq!(volley.kinds.len(), 1, "{:?}", volley.kinds);
    assert!(only.starts_with("POST /hi ["), "{only}");
    assert!(only.contains("content-type"), "{only}");
    assert!(only.ends_with("name=ada&lang=lua"), "{only}");
}

#[test]
fn a_counter_script_builds_each_request() {
    let Some((_, volley)) = same_under_both("counter.lua", &[], &[]) else {
        return;
    };
    assert!(
        volley
            .kinds
            .keys()
            .all(|k| k.starts_with("GET /echo?n=N [host,x-sequence]")),
        "{volley:?}"
    );
}

#[test]
fn a_pipeline_script_sends_its_three_requests_in_thirds() {
    let Some((_, volley)) = same_under_both("pipeline.lua", &[], &[]) else {
        return;
    };
    assert_eq!(volley.kinds.len(), 3, "{:?}", volley.kinds);
    for count in volley.kinds.values() {
        let share = *count as f64 / volley.total as f64;
        assert!((share - 1.0 / 3.0).abs() < 0.01, "{:?}", volley.kinds);
    }
}

#[test]
fn an_auth_script_sends_the_token_a_response_gave() {
    let Some((_, volley)) = same_under_both("auth.lua", &[], &[]) else {
        return;
    };
    let me = volley
        .kinds
        .keys()
        .find(|k| k.starts_with("GET /api/me"))
        .expect("requests with the token");
    assert!(me.contains("authorization"), "{me}");
    // A login per connection at most (each sends one before the first answer).
    let logins: usize = volley
        .kinds
        .iter()
        .filter(|(k, _)| k.starts_with("POST /api/login"))
        .map(|(_, n)| n)
        .sum();
    assert!((1..=4).contains(&logins), "{:?}", volley.kinds);
}

#[test]
fn a_delay_script_waits_between_requests() {
    let Some((wrk, volley)) = same_under_both("delay.lua", &[], &[]) else {
        return;
    };
    // 4 connections waiting 20-40 ms each: about 130 requests in 1 s.
    for seen in [&wrk, &volley] {
        assert!((40..=250).contains(&seen.total), "{seen:?}");
    }
}

#[test]
fn a_setup_script_hands_values_to_threads_and_reads_them_back() {
    let printed = ["thread "];
    let Some((wrk, volley)) = same_under_both("setup.lua", &["one", "two"], &printed) else {
        return;
    };
    assert_eq!(volley.lines.len(), 4, "{:?}", volley.lines);
    // `init`'s lines come before the load's report, `done`'s after it.
    for seen in [&wrk, &volley] {
        assert!(
            seen.lines[..2].iter().all(|l| l.contains(" ready, ")),
            "{:?}",
            seen.lines
        );
    }
    assert!(
        volley
            .lines
            .contains(&"thread N ready, N argument(s): one two".to_string()),
        "{:?}",
        volley.lines
    );
}

#[test]
fn an_addr_script_chooses_each_threads_server() {
    let Some((_, volley)) = same_under_both("addr.lua", &[], &["connecting to "]) else {
        return;
    };
    assert_eq!(
        volley.lines,
        ["connecting to N.N.N.N:N", "connecting to N.N.N.N:N"]
    );
}

#[test]
fn a_report_script_prints_its_csv_after_the_run() {
    let printed = ["percentile,", "N", "errors,"];
    let Some((_, volley)) = same_under_both("report.lua", &[], &printed) else {
        return;
    };
    assert_eq!(volley.lines.len(), 6, "{:?}", volley.lines);
}

#[test]
fn a_stop_script_ends_each_thread_after_its_fortieth_answer() {
    let Some((wrk, volley)) = same_under_both("stop.lua", &[], &[]) else {
        return;
    };
    // 40 answers a thread, and what its connections had in flight.
    for seen in [&wrk, &volley] {
        assert!((80..=80 + 4 * 2).contains(&seen.total), "{seen:?}");
    }
}
